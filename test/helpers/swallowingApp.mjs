// A DBOS app shaped like DBOS's own starters: it launches inside main() and a failed launch is only logged
// (`main().catch(console.log)`), so the process runs on with DBOS half started. No afterlife kit.
import { DBOS } from '@dbos-inc/dbos-sdk';

async function main() {
  DBOS.setConfig({
    name: process.env.APP_NAME,
    systemDatabaseUrl: process.env.DBOS_SYSTEM_DATABASE_URL,
    applicationVersion: process.env.APP_VERSION,
    executorID: process.env.DBOS__VMID,
    logLevel: 'warn',
  });
  await DBOS.launch();
  console.log('LAUNCHED');
}
main().catch((err) => console.log(`LAUNCH FAILED ${String(err)}`));
setInterval(() => {}, 1 << 30);
