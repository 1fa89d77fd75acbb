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

# DEAD_LETTER_TOPIC: workflows that diverged more than MAX_REPAIRS times (also recorded in afterlife's schema).
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
  Delivery of death notices: a push subscription we own (Google's "direct Pub/Sub trigger")

  Declarative end to end: the retry policy, the dead-letter policy and the OIDC identity are plain
  Terraform (an Eventarc trigger's subscription cannot take a dead-letter policy from Terraform,
  hashicorp/terraform-provider-google#25069). The endpoint ends in /projects/<p>/topics/<t>: that is
  where functions-framework reads the topic when it turns the raw push body into the CloudEvent that
  executorDeath takes (the conversion drops deliveryAttempt, which nothing depends on: Pub/Sub counts).
  A nack (5xx) is redelivered with backoff; the handler acks poison itself, so only notices that kept
  failing for a transient reason reach the dead-letter topic.
 *****************************************/

resource "google_pubsub_subscription" "executor_death_push" {
  project = var.project_id
  name    = "${var.name_prefix}-executor-death-push"
  topic   = google_pubsub_topic.executor_deaths.id
  labels  = local.labels
  # For push, the time Pub/Sub waits for the function's answer: the whole recovery budget plus a cold start.
  ack_deadline_seconds       = min(local.function_settings.executor_death.timeout_seconds + 30, 600)
  message_retention_duration = var.topics.message_retention

  push_config {
    push_endpoint = "${module.executor_death.uri}/projects/${var.project_id}/topics/${google_pubsub_topic.executor_deaths.name}"
    oidc_token {
      service_account_email = google_service_account.trigger.email
      # Cloud Run checks the token's audience against the service URL, not the endpoint's path.
      audience = module.executor_death.uri
    }
  }

  retry_policy {
    minimum_backoff = var.executor_death_dead_letter.minimum_backoff
    maximum_backoff = var.executor_death_dead_letter.maximum_backoff
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.executor_deaths_dead_letter.id
    max_delivery_attempts = var.executor_death_dead_letter.max_delivery_attempts
  }

  expiration_policy {
    ttl = "" # never expires for inactivity
  }

  depends_on = [google_pubsub_topic_iam_member.dead_letter_forwarder, google_service_account_iam_member.pubsub_mints_trigger_tokens]
}

# Dead-lettering: Pub/Sub's service agent acks the message on the source subscription...
resource "google_pubsub_subscription_iam_member" "dead_letter_source" {
  project      = var.project_id
  subscription = google_pubsub_subscription.executor_death_push.name
  role         = "roles/pubsub.subscriber"
  member       = "serviceAccount:${local.pubsub_service_agent}"
}

# ...and publishes it on the dead-letter topic.
resource "google_pubsub_topic_iam_member" "dead_letter_forwarder" {
  project = var.project_id
  topic   = google_pubsub_topic.executor_deaths_dead_letter.name
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:${local.pubsub_service_agent}"
}
