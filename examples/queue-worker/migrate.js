'use strict';
// Once per database, before the first worker: DBOS's system schema (by DBOS itself). afterlife's own schema
// comes from `afterlife-plane migrate` (the recovery plane's CLI), also once.
const { DBOS } = require('@dbos-inc/dbos-sdk');

DBOS.migrate(process.env.DBOS_SYSTEM_DATABASE_URL).then(
  () => console.log(JSON.stringify({ event: 'dbos_migrated' })),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
