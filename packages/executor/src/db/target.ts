/**
 * Where and how the pool connects, in db/ beside the pool that reads it: the plane's configuration
 * (shared/config) builds one and createPool takes one, so the pool (which the kit uses too) never depends
 * on the plane's configuration.
 */
export type DatabaseTarget =
  | { kind: 'url'; url: string }
  | {
      kind: 'connector';
      instanceConnectionName: string;
      user: string;
      database: string;
      password: string | undefined;
      ipType: 'PUBLIC' | 'PRIVATE' | 'PSC';
      iamAuth: boolean;
    };

export type PoolTarget = DatabaseTarget & { poolMax: number; connectTimeoutMs: number; statementTimeoutMs: number };
