output "name" {
  description = "Function name."
  value       = google_cloudfunctions2_function.this.name
}

output "uri" {
  description = "HTTPS URI of the function."
  value       = google_cloudfunctions2_function.this.service_config[0].uri
}

output "service" {
  description = "Name of the Cloud Run service behind the function."
  value       = google_cloudfunctions2_function.this.service_config[0].service
}

output "trigger" {
  description = "Eventarc trigger resource name, or null for an HTTP function."
  value       = var.event_trigger == null ? null : google_cloudfunctions2_function.this.event_trigger[0].trigger
}
