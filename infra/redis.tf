/******************************************
  Memorystore for Redis: recovery locks and executor heartbeats. Postgres stays the authority, so a
  BASIC tier is enough; an outage degrades afterlife, it does not stop recovery.
 *****************************************/

resource "google_redis_instance" "this" {
  count = var.redis.enabled ? 1 : 0

  project            = var.project_id
  region             = var.region
  name               = "${var.name_prefix}-redis"
  display_name       = "afterlife locks and heartbeats (${var.afterlife.dbos_application_name})"
  tier               = var.redis.tier
  memory_size_gb     = var.redis.memory_size_gb
  redis_version      = var.redis.redis_version
  authorized_network = local.network_id
  connect_mode       = var.redis.connect_mode
  auth_enabled       = true
  # Server-authentication TLS: the functions and the kit connect with rediss:// and verify the server
  # against server_ca_certs (REDIS_CA_CERT, secrets.tf). Changing it replaces the instance.
  transit_encryption_mode = var.redis.transit_encryption ? "SERVER_AUTHENTICATION" : "DISABLED"
  labels                  = local.labels

  depends_on = [google_project_service.this, google_compute_subnetwork.this]
}

locals {
  redis_tls = var.redis.enabled && var.redis.transit_encryption
  # Every CA the instance lists: during a rotation (a new CA five years in) both are valid.
  redis_ca_pem = local.redis_tls ? join("", google_redis_instance.this[0].server_ca_certs[*].cert) : null
}
