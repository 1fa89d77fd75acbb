variable "project_id" {
  description = "Project to deploy into."
  type        = string
}

variable "region" {
  description = "Region of everything."
  type        = string
  default     = "europe-west1"
}

variable "dbos_application_name" {
  description = "DBOSConfig.name of the app afterlife guards."
  type        = string
}

variable "instance_connection_name" {
  description = "Cloud SQL instance holding DBOS's system database: project:region:instance."
  type        = string
}

variable "database" {
  description = "Database of DBOS's system schema."
  type        = string
}

variable "network" {
  description = "VPC of the Cloud SQL instance's private IP."
  type        = string
  default     = "default"
}

variable "build_service_account" {
  description = "Cloud Build service account (projects/<p>/serviceAccounts/<email>), or null for the project default."
  type        = string
  default     = null
}

variable "executor_service_accounts" {
  description = "Service accounts of the DBOS executors that run the afterlife kit, keyed by a static name."
  type        = map(string)
  default     = {}
}

variable "drain_invokers" {
  description = "Members allowed to call the drain function, keyed by a static name."
  type        = map(string)
  default     = {}
}

variable "apply_database_grants" {
  description = "Let Terraform grant pg_read_all_stats to the reaper through the Cloud SQL Data API (needs the instance's data_api_access and an admin IAM database user running terraform); else run output database_grants_sql."
  type        = bool
  default     = false
}

variable "notification_channels" {
  description = "Cloud Monitoring notification channels of the alert policies (projects/<p>/notificationChannels/<id>)."
  type        = list(string)
  default     = []
}
