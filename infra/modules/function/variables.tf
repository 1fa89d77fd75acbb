variable "project_id" {
  description = "Project of the function."
  type        = string
}

variable "region" {
  description = "Region of the function (and of its Eventarc trigger)."
  type        = string
}

variable "name" {
  description = "Function (and Cloud Run service) name."
  type        = string
}

variable "description" {
  description = "What the function does, shown in the console."
  type        = string
  default     = null
}

variable "entry_point" {
  description = "The functions-framework target the code registers (ff.http / ff.cloudEvent name)."
  type        = string
}

variable "runtime" {
  description = "Cloud Run functions runtime. nodejs20 was decommissioned on 2026-10-30, nodejs22 is deprecated on 2027-04-30; nodejs24 runs to 2028-10-31."
  type        = string
  default     = "nodejs24"
}

variable "source_archive" {
  description = "The uploaded source archive (bucket and object name)."
  type = object({
    bucket = string
    object = string
  })
}

variable "build_service_account" {
  description = "Service account Cloud Build uses to build the function (projects/<p>/serviceAccounts/<email>); null for the project default."
  type        = string
  default     = null
}

variable "service_account_email" {
  description = "Runtime service account: the identity the code runs as."
  type        = string
}

variable "service" {
  description = "Scaling and request settings of the Cloud Run service behind the function."
  type = object({
    timeout_seconds  = optional(number, 60)
    memory           = optional(string, "512Mi")
    cpu              = optional(string, "1")
    min_instances    = optional(number, 0)
    max_instances    = optional(number, 10)
    concurrency      = optional(number, 1)
    ingress_settings = optional(string, "ALLOW_INTERNAL_ONLY")
  })
  default = {}

  validation {
    condition     = contains(["ALLOW_ALL", "ALLOW_INTERNAL_ONLY", "ALLOW_INTERNAL_AND_GCLB"], var.service.ingress_settings)
    error_message = "ingress_settings must be ALLOW_ALL, ALLOW_INTERNAL_ONLY or ALLOW_INTERNAL_AND_GCLB."
  }
}

variable "environment_variables" {
  description = "Plain environment variables (FUNCTION_TIMEOUT_S is added by this module from the timeout)."
  type        = map(string)
  default     = {}
}

variable "secret_environment_variables" {
  description = "Environment variables read from Secret Manager, keyed by variable name."
  type = map(object({
    secret  = string
    version = optional(string, "latest")
  }))
  default = {}
}

variable "vpc" {
  description = "Direct VPC egress (no Serverless VPC Access connector); null for no VPC access."
  type = object({
    network    = string
    subnetwork = string
    egress     = optional(string, "VPC_EGRESS_PRIVATE_RANGES_ONLY")
    tags       = optional(list(string), [])
  })
  default = null
}

variable "event_trigger" {
  description = "Eventarc Pub/Sub trigger; null for an HTTP function."
  type = object({
    pubsub_topic          = string
    service_account_email = string
    retry_policy          = optional(string, "RETRY_POLICY_RETRY")
  })
  default = null
}

variable "invokers" {
  description = <<-EOT
    Members granted roles/run.invoker on the function's Cloud Run service, keyed by a static name (the
    members are often service-account emails that are unknown until apply, and for_each keys must be known
    at plan time). Never allUsers.
  EOT
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for m in values(var.invokers) : !contains(["allUsers", "allAuthenticatedUsers"], m)])
    error_message = "afterlife's functions are private: allUsers / allAuthenticatedUsers cannot invoke them."
  }
}

variable "labels" {
  description = "Labels on the function."
  type        = map(string)
  default     = {}
}
