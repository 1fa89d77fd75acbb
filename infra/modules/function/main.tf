/******************************************
  One gen2 function: the unit repeated for executorDeath, reaper and drain
 *****************************************/

locals {
  # The work budget derives from the real timeout, so Terraform sets it from the same number; nothing
  # else can make the two disagree.
  builtin_env = {
    FUNCTION_TIMEOUT_S = tostring(var.service.timeout_seconds)
  }
}

resource "google_cloudfunctions2_function" "this" {
  project     = var.project_id
  location    = var.region
  name        = var.name
  description = var.description
  labels      = var.labels

  build_config {
    runtime         = var.runtime
    entry_point     = var.entry_point
    service_account = var.build_service_account
    source {
      storage_source {
        bucket = var.source_archive.bucket
        object = var.source_archive.object
      }
    }
  }

  service_config {
    timeout_seconds                  = var.service.timeout_seconds
    available_memory                 = var.service.memory
    available_cpu                    = var.service.cpu
    min_instance_count               = var.service.min_instances
    max_instance_count               = var.service.max_instances
    max_instance_request_concurrency = var.service.concurrency
    ingress_settings                 = var.service.ingress_settings
    all_traffic_on_latest_revision   = true
    service_account_email            = var.service_account_email
    environment_variables            = merge(var.environment_variables, local.builtin_env)

    dynamic "secret_environment_variables" {
      for_each = var.secret_environment_variables
      content {
        key        = secret_environment_variables.key
        project_id = var.project_id
        secret     = secret_environment_variables.value.secret
        version    = secret_environment_variables.value.version
      }
    }

    direct_vpc_egress = var.vpc == null ? null : var.vpc.egress
    dynamic "direct_vpc_network_interface" {
      for_each = var.vpc == null ? [] : [var.vpc]
      content {
        network    = direct_vpc_network_interface.value.network
        subnetwork = direct_vpc_network_interface.value.subnetwork
        tags       = direct_vpc_network_interface.value.tags
      }
    }
  }

  dynamic "event_trigger" {
    for_each = var.event_trigger == null ? [] : [var.event_trigger]
    content {
      trigger_region        = var.region
      event_type            = "google.cloud.pubsub.topic.v1.messagePublished"
      pubsub_topic          = event_trigger.value.pubsub_topic
      retry_policy          = event_trigger.value.retry_policy
      service_account_email = event_trigger.value.service_account_email
    }
  }
}

/******************************************
  Who may invoke it: gen2 functions are Cloud Run services, so invoking is roles/run.invoker on the service
 *****************************************/

resource "google_cloud_run_v2_service_iam_member" "invoker" {
  for_each = var.invokers

  project  = var.project_id
  location = var.region
  name     = google_cloudfunctions2_function.this.service_config[0].service
  role     = "roles/run.invoker"
  member   = each.value
}
