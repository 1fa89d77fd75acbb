output "functions" {
  description = "The deployed functions."
  value       = module.afterlife.functions
}

output "db_users" {
  description = "Postgres users to grant (docs/operations.md, \"Deploying to Google Cloud\", step 4)."
  value       = module.afterlife.db_users
}

output "database_grants_sql" {
  description = "The Postgres grants to run as the schema owner after `afterlife-plane migrate` (docs/operations.md, \"Deploying to Google Cloud\", step 4)."
  value       = module.afterlife.database_grants_sql
}

output "redis" {
  description = "Memorystore and the REDIS_URL secret."
  value       = module.afterlife.redis
}
