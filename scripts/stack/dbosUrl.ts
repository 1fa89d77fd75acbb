/**
 * The system database URL the stack hands to DBOS executors (the demo's, the printed export line).
 *
 * DBOS 5.3 bounds idle-in-transaction sessions itself unless the URL already does: on each new pool
 * connection it sends `SET idle_in_transaction_session_timeout` without waiting for it, and the borrower's
 * first query then queues behind it on the same client — pg 8 prints "Calling client.query() when the
 * client is already executing a query is deprecated" in every fresh executor. With the setting in the URL's
 * startup options the server applies it at connect and DBOS sends nothing (it checks the URL first).
 */
export const DBOS_IDLE_TRANSACTION_TIMEOUT_MS = 60_000;

export function dbosSystemUrl(url: string, timeoutMs = DBOS_IDLE_TRANSACTION_TIMEOUT_MS): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return url;
  }
  const options = u.searchParams.get('options') ?? '';
  if (options.includes('idle_in_transaction_session_timeout')) return url;
  u.searchParams.set('options', `${options ? `${options} ` : ''}-c idle_in_transaction_session_timeout=${timeoutMs}`);
  return u.toString();
}
