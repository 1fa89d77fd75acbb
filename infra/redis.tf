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
  # The code has no setting for Memorystore's server CA yet (REDIS_URL only); traffic stays in the VPC.
  transit_encryption_mode = "DISABLED"
  labels                  = local.labels

  depends_on = [google_project_service.this, google_compute_subnetwork.this]
}
