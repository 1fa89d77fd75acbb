/******************************************
  VPC for Direct VPC egress: the functions reach Memorystore (and a private-IP Cloud SQL) without a
  Serverless VPC Access connector. Only private ranges go through the VPC by default.
 *****************************************/

resource "google_compute_network" "this" {
  count = var.network.create ? 1 : 0

  project                 = var.project_id
  name                    = var.network.name
  auto_create_subnetworks = false

  depends_on = [google_project_service.this]
}

resource "google_compute_subnetwork" "this" {
  count = var.network.create_subnetwork ? 1 : 0

  project = var.project_id
  region  = var.region
  name    = var.network.subnetwork
  network = local.network_id
  # Direct VPC egress takes one address per instance (twice that during revision changes); /26 suits the
  # default maximum of 14 instances.
  ip_cidr_range            = var.network.subnet_cidr
  private_ip_google_access = true
}

locals {
  network_id    = var.network.create ? google_compute_network.this[0].id : "projects/${var.project_id}/global/networks/${var.network.name}"
  subnetwork_id = var.network.create_subnetwork ? google_compute_subnetwork.this[0].id : "projects/${var.project_id}/regions/${var.region}/subnetworks/${var.network.subnetwork}"
}
