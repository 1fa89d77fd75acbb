/******************************************
  afterlife guarding one DBOS app: a new VPC, Memorystore, an existing Cloud SQL instance with IAM
  database auth. Copy terraform.tfvars.example to terraform.tfvars and fill it in.
 *****************************************/

provider "google" {
  project = var.project_id
  region  = var.region
}

module "afterlife" {
  source = "../.."

  project_id = var.project_id
  region     = var.region
  # Built by infra/package.sh from the repository root.
  source_dir = "${path.module}/../../../build/function"

  afterlife = {
    dbos_application_name = var.dbos_application_name
  }

  # The VPC of Cloud SQL's private IP; the module adds a /26 subnet for the functions.
  network = {
    name       = var.network
    subnetwork = "afterlife-${var.region}"
  }

  cloud_sql = {
    instance_connection_name = var.instance_connection_name
    database                 = var.database
  }

  # The reaper's pg_read_all_stats: Terraform grants it when the instance allows the Data API.
  database_grants = { apply = var.apply_database_grants }

  build_service_account     = var.build_service_account
  executor_service_accounts = var.executor_service_accounts
  drain_invokers            = var.drain_invokers

  # Who hears about dead letters, a silent reaper, orphaned versions, … (docs/operations.md, "Observability").
  alerts = { notification_channels = var.notification_channels }
}
