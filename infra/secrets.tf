/******************************************
  Secret Manager: the Redis URL with its AUTH string. The code reads one REDIS_URL, so the secret holds
  the whole redis://:<auth>@host:port. (The AUTH string is in Terraform state either way: it is an
  attribute of google_redis_instance. Keep state in a bucket only operators can read.)
  An optional DB password secret is created outside Terraform and only referenced (var.cloud_sql).
 *****************************************/

resource "google_secret_manager_secret" "redis_url" {
  count = var.redis.enabled ? 1 : 0

  project   = var.project_id
  secret_id = "${var.name_prefix}-redis-url"
  labels    = local.labels

  replication {
    auto {}
  }

  depends_on = [google_project_service.this]
}

resource "google_secret_manager_secret_version" "redis_url" {
  count = var.redis.enabled ? 1 : 0

  secret      = google_secret_manager_secret.redis_url[0].id
  secret_data = "${local.redis_tls ? "rediss" : "redis"}://:${google_redis_instance.this[0].auth_string}@${google_redis_instance.this[0].host}:${google_redis_instance.this[0].port}"
}

# REDIS_CA_CERT: not secret, but a secret is how both the functions and the executors' services get it
# (secret_environment_variables), with the same grants as the URL.
resource "google_secret_manager_secret" "redis_ca" {
  count = local.redis_tls ? 1 : 0

  project   = var.project_id
  secret_id = "${var.name_prefix}-redis-ca"
  labels    = local.labels

  replication {
    auto {}
  }

  depends_on = [google_project_service.this]
}

resource "google_secret_manager_secret_version" "redis_ca" {
  count = local.redis_tls ? 1 : 0

  secret      = google_secret_manager_secret.redis_ca[0].id
  secret_data = local.redis_ca_pem
}

resource "google_secret_manager_secret_iam_member" "redis_ca" {
  for_each = local.redis_tls ? merge(
    { for key, sa in google_service_account.runtime : key => sa.email },
    { for key, email in var.executor_service_accounts : "executor/${key}" => email },
  ) : {}

  project   = var.project_id
  secret_id = google_secret_manager_secret.redis_ca[0].secret_id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${each.value}"
}

resource "google_secret_manager_secret_iam_member" "redis_url_runtime" {
  for_each = { for key, sa in google_service_account.runtime : key => sa.email if var.redis.enabled }

  project   = var.project_id
  secret_id = google_secret_manager_secret.redis_url[0].secret_id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${each.value}"
}

# The executors' kit writes heartbeats to the same Redis.
resource "google_secret_manager_secret_iam_member" "redis_url_executors" {
  for_each = { for key, email in var.executor_service_accounts : key => email if var.redis.enabled }

  project   = var.project_id
  secret_id = google_secret_manager_secret.redis_url[0].secret_id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${each.value}"
}

resource "google_secret_manager_secret_iam_member" "db_password_runtime" {
  for_each = { for key, sa in google_service_account.runtime : key => sa.email if !local.iam_db_auth }

  project   = var.project_id
  secret_id = var.cloud_sql.password_secret
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${each.value}"
}
