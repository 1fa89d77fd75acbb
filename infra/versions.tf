terraform {
  required_version = ">= 1.5"

  required_providers {
    google = {
      source = "hashicorp/google"
      # 7.10 brought Direct VPC egress to gen2 functions; 7.26 fixed the "only one of
      # direct_vpc_network_interface or vpc_connector" validation that rejected it; 7.34 has
      # google_sql_provision_script (iam.tf, the reaper's pg_read_all_stats grant).
      version = "~> 7.34"
    }
    archive = {
      source  = "hashicorp/archive"
      version = ">= 2.4"
    }
  }

  # As terraform-google-modules blueprints do: the provider's user agent names the module and version.
  provider_meta "google" {
    module_name = "blueprints/terraform/afterlife/v0.1.0"
  }
}
