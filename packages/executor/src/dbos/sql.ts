/** The database clock in DBOS's unit (epoch ms), as DBOS's own statements compute it. */
export const NOW_MS = `(EXTRACT(EPOCH FROM now()) * 1000)::bigint`;

/** DBOS's application scope: this app's rows plus unclaimed rows (NULL belongs to every app). */
export const appScope = (column: string, param: string) => `(${column} = ${param} OR ${column} IS NULL)`;
