/******************************************
  Log-based metrics. The code logs JSON lines on stdout; Cloud Run turns them into jsonPayload, and
  every countable outcome carries an `event` field. This map is the one list of them: add an event
  here when the code starts logging a new one.
 *****************************************/

locals {
  log_events = {
    recovery                         = "executorDeath recovered a dead executor's workflows"
    recovery_retry                   = "a death notice was nacked for redelivery (transient failure)"
    poison_message                   = "a message was acked without effect: invalid, foreign, or permanently failing"
    orphaned_version                 = "rows of an application version no live executor runs"
    executor_dead                    = "the reaper declared an executor dead (heartbeat lapsed, or no kit and no sessions)"
    stuck_workflow                   = "a PENDING workflow on a live executor showed no activity for STUCK_AFTER_MS"
    stuck_not_forked                 = "a stuck workflow was cancelled but not forked"
    diverged_not_forked              = "a diverged workflow the reaper found was not forked"
    reaper_tick                      = "a reaper tick that acted (declared, recovered, repaired, reported) or failed; quiet ticks log nothing of their own"
    reaper_ticks                     = "the reaper's ticks of the last minute, counted (one line a minute and one per invocation, idle or not: alert when this stops)"
    reaper_summary                   = "one reaper invocation finished"
    reaper_skipped                   = "another reaper held the lease"
    reaper_lease_lost                = "the reaper lost its lease mid-invocation"
    reaper_tick_gap                  = "no reaper ticked for more than a second, or four ticks (the line carries gapMs)"
    reaper_failed                    = "a reaper invocation failed"
    redis_reset                      = "Redis was flushed or restarted; heartbeat absence streaks restarted"
    sessions_unknown                 = "afterlife's role cannot see other roles' sessions (grant pg_read_all_stats)"
    sessions_unattributed            = "sessions that name no executor (DBOS for Python's dbos_transact) are open: executors without the kit are not judged"
    fork                             = "a diverged workflow was forked"
    rewind                           = "a diverged workflow was rewound under its own ID (repair in place)"
    repair_fork_fallback             = "a repair forked instead of rewinding (REPAIR_MODE=fork, DBOS 5.2, data-source checkpoints past the cut)"
    repair_rewind_serves_transaction = "a same-path rewind (stuck, orphaned version) is served a data-source transaction the system database never recorded"
    repair_refused                   = "a fork was refused: it would apply again a transaction the system database never recorded; the workflow waits for a repair under its own ID"
    dead_letter                      = "a workflow exhausted its forks and was dead-lettered"
    drain_requested                  = "an operator or deploy pipeline asked executors to drain"
    fork_skipped                     = "a diverged workflow was not forked (already forked, busy, or not eligible)"
    fork_failed                      = "forking a diverged workflow failed; the next pass retries"
    orphaned_version_forked          = "a workflow of a version no live executor runs was forked onto the latest version"
    orphaned_version_cancelled       = "the original of a fork-to-latest fork was cancelled"
    orphaned_version_fork_failed     = "fork-to-latest failed for a workflow; it waits for the reaper's sweep"
    recovery_false_alarm             = "a recovery stopped: the heartbeat came back, or the guard found the executor active"
    executor_not_dead                = "the reaper's death evidence was contradicted at recovery time; nothing was declared"
    runtime_start_failed             = "a function instance could not build its runtime (config, database, schema, grants); it answers 503 / nacks and retries with backoff"
    death_notice_refused             = "a manual/sigterm/drained notice named an executor whose heartbeat says alive; acked without effect (force: true overrides)"
    drain_failed                     = "a drain request failed with an unexpected error (500)"
    recovery_rows_locked             = "a recovery left PENDING rows another transaction holds; it is audited partial and retried once they are free"
    retention_batch                  = "one retention batch deleted completed workflows (the line carries deleted and durationMs)"
    retention_pass                   = "one retention pass finished (policy, deleted, timed out, why it stopped)"
    retention_unbounded              = "a workflow whose delete hit the lock bound three times in a row was deleted without it (its history is huge)"
    workflow_timed_out               = "WORKFLOW_GLOBAL_TIMEOUT_MS cancelled a workflow (its children with it)"
    grants_missing                   = "a function's database role lacks grants its code needs (infra/grants.sql not rerun since DBOS or the app's data source created a table); the line names them"
    liveness_lock_squatted           = "an executor's liveness key is held by a session that is not the kit's registered one; read as free and reported"
    recovery_duplicate               = "a death notice repeated a death already audited, or named an incarnation the registry does not hold, with nothing PENDING: no new audit row"
    recovery_left_alone              = "a dead executor owns workflows in statuses afterlife never acts on (SUSPENDED, or one it does not know): left alone, reported"
    requeued_hint_failed             = "a recovery moved work but could not ask survivors to claim it now (the NOTIFY failed); it waits for their next queue poll"
    threshold_below_floor            = "a start with a threshold that cancels or deletes set below its floor (AFTERLIFE_ALLOW_BELOW_FLOOR names it)"
    unguarded_application            = "live kits are registered in this database under an application no plane guards; their deaths are not recovered"
    redis_witness_blind              = "Redis cannot judge a death (unreachable, or its keys lost since the last tick): a free liveness lock decides alone after REDIS_BLIND_FALLBACK_MS"
    recovery_timeline                = "one death's recovery timeline, closed once its moved work all started elsewhere or its bound passed (docs/operations.md, Recovery timelines)"
  }

  # Only afterlife's own services; the executors' kit logs in the app's services.
  log_scope = "resource.type=\"cloud_run_revision\" AND resource.labels.service_name=(\"${module.executor_death.service}\" OR \"${module.reaper.service}\" OR \"${module.drain.service}\")"
}

resource "google_logging_metric" "event" {
  for_each = local.log_events

  project     = var.project_id
  name        = "${var.name_prefix}/${each.key}"
  description = each.value
  filter      = "${local.log_scope} AND jsonPayload.event=\"${each.key}\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
    labels {
      key         = "service"
      value_type  = "STRING"
      description = "Cloud Run service (function) that logged the event"
    }
    # Poison is acked for three unrelated reasons; the dashboard charts them apart.
    dynamic "labels" {
      for_each = each.key == "poison_message" ? ["cause"] : []
      content {
        key         = labels.value
        value_type  = "STRING"
        description = "why the message was poison: undecodable, foreign-application or permanent-failure"
      }
    }
  }

  label_extractors = merge(
    { service = "EXTRACT(resource.labels.service_name)" },
    each.key == "poison_message" ? { cause = "EXTRACT(jsonPayload.cause)" } : {},
  )

  depends_on = [google_project_service.this]
}

# How long a recovery took from notice to last batch (the `elapsedMs` of `event: recovery` lines).
resource "google_logging_metric" "recovery_latency" {
  project     = var.project_id
  name        = "${var.name_prefix}/recovery_latency"
  description = "Time executorDeath spent on one death notice"
  filter      = "${local.log_scope} AND jsonPayload.event=\"recovery\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = "ms"
  }

  value_extractor = "EXTRACT(jsonPayload.elapsedMs)"

  bucket_options {
    exponential_buckets {
      num_finite_buckets = 20
      growth_factor      = 2
      scale              = 10
    }
  }

  depends_on = [google_project_service.this]
}

# Retention (docs/retention.md): workflows deleted per batch, and how long each batch statement held its
# row locks (the `deleted` and `durationMs` of `event: retention_batch` lines).
resource "google_logging_metric" "retention" {
  for_each = { retention_deleted = { field = "deleted", unit = "1", scale = 1 }, retention_batch_ms = { field = "durationMs", unit = "ms", scale = 1 } }

  project     = var.project_id
  name        = "${var.name_prefix}/${each.key}"
  description = "retention_batch lines: ${each.value.field}"
  filter      = "${local.log_scope} AND jsonPayload.event=\"retention_batch\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = each.value.unit
  }

  value_extractor = "EXTRACT(jsonPayload.${each.value.field})"

  bucket_options {
    exponential_buckets {
      num_finite_buckets = 20
      growth_factor      = 2
      scale              = each.value.scale
    }
  }

  depends_on = [google_project_service.this]
}

# Function errors: ERROR lines of afterlife's own code, its crashes and Cloud Run's system messages (an
# out-of-memory kill), but not the request log, whose 5xx lines are executorDeath's nacks (counted by
# recovery_retry and alerted on their own).
resource "google_logging_metric" "function_errors" {
  project     = var.project_id
  name        = "${var.name_prefix}/function_errors"
  description = "ERROR lines of afterlife's functions (not the request log)"
  filter      = "${local.log_scope} AND severity>=ERROR AND NOT log_id(\"run.googleapis.com/requests\")"

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
    labels {
      key         = "service"
      value_type  = "STRING"
      description = "Cloud Run service (function) that logged the error"
    }
  }

  label_extractors = {
    service = "EXTRACT(resource.labels.service_name)"
  }

  depends_on = [google_project_service.this]
}
