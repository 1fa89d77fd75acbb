/******************************************
  Topics: death notices, their dead letters, and workflows that exhausted their forks
 *****************************************/

resource "google_pubsub_topic" "executor_deaths" {
  project                    = var.project_id
  name                       = var.topics.executor_deaths
  message_retention_duration = var.topics.message_retention
  labels                     = local.labels

  depends_on = [google_project_service.this]
}

# Death notices that failed max_delivery_attempts times. The handler acks poison input itself, so what
# lands here failed for a reason that retries did not fix (a long outage, a bug) and is worth replaying.
resource "google_pubsub_topic" "executor_deaths_dead_letter" {
  project                    = var.project_id
  name                       = var.topics.executor_deaths_dead_letter
  message_retention_duration = var.topics.message_retention
  labels                     = local.labels

  depends_on = [google_project_service.this]
}

# DEAD_LETTER_TOPIC: workflows that diverged more than MAX_FORKS times (also recorded in afterlife's schema).
resource "google_pubsub_topic" "workflow_dead_letters" {
  project                    = var.project_id
  name                       = var.topics.workflow_dead_letters
  message_retention_duration = var.topics.message_retention
  labels                     = local.labels

  depends_on = [google_project_service.this]
}

# A topic keeps nothing without a subscription: these hold dead letters until an operator reads them.
resource "google_pubsub_subscription" "hold" {
  for_each = {
    executor_deaths_dead_letter = google_pubsub_topic.executor_deaths_dead_letter
    workflow_dead_letters       = google_pubsub_topic.workflow_dead_letters
  }

  project                    = var.project_id
  name                       = "${each.value.name}-hold"
  topic                      = each.value.id
  message_retention_duration = var.topics.message_retention
  retain_acked_messages      = true
  ack_deadline_seconds       = 60
  labels                     = local.labels

  expiration_policy {
    ttl = "" # never expires for inactivity
  }
}

/******************************************
  Dead-lettering on the Eventarc trigger's subscription

  executorDeath keeps its Eventarc trigger (RETRY_POLICY_RETRY, a CloudEvent, Eventarc-managed auth).
  The provider cannot give the subscription Eventarc creates a dead-letter policy
  (hashicorp/terraform-provider-google#25069, #17697), so it is patched after apply, which is what
  Google documents for Eventarc triggers. The patch re-runs whenever the trigger (and with it the
  subscription) is replaced. See README, "Deploying to Google Cloud".
 *****************************************/

locals {
  executor_death_dead_letter_command = <<-EOT
    set -euo pipefail
    sub=$(gcloud eventarc triggers describe '${module.executor_death.trigger}' --project='${var.project_id}' --location='${var.region}' --format='value(transport.pubsub.subscription)')
    test -n "$sub"
    gcloud pubsub subscriptions update "$sub" --project='${var.project_id}' --dead-letter-topic='${google_pubsub_topic.executor_deaths_dead_letter.id}' --max-delivery-attempts=${var.executor_death_dead_letter.max_delivery_attempts}
    gcloud pubsub subscriptions add-iam-policy-binding "$sub" --project='${var.project_id}' --member='serviceAccount:${local.pubsub_service_agent}' --role=roles/pubsub.subscriber >/dev/null
  EOT
}

resource "terraform_data" "executor_death_dead_letter" {
  count = var.executor_death_dead_letter.patch_trigger_subscription ? 1 : 0

  triggers_replace = [
    module.executor_death.trigger,
    google_pubsub_topic.executor_deaths_dead_letter.id,
    var.executor_death_dead_letter.max_delivery_attempts,
  ]

  provisioner "local-exec" {
    interpreter = ["bash", "-c"]
    command     = local.executor_death_dead_letter_command
  }

  depends_on = [google_pubsub_topic_iam_member.dead_letter_forwarder]
}

# Pub/Sub's service agent forwards undeliverable notices to the dead-letter topic.
resource "google_pubsub_topic_iam_member" "dead_letter_forwarder" {
  project = var.project_id
  topic   = google_pubsub_topic.executor_deaths_dead_letter.name
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:${local.pubsub_service_agent}"
}
