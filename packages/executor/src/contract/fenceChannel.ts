/**
 * The channel on which a declaration of death is announced, so the executor (if alive after all) asks its
 * records. Here, below both, because the registry's statement sends on it and the kit's liveness listens.
 */
export function fenceChannel(afterlifeSchema: string): string {
  return `${afterlifeSchema}_fence`.slice(0, 63);
}

/**
 * The channel on which a drain request is announced (`{"applicationName": …}`), so the kits of that
 * application look for one now instead of at their next periodic poll. A hint only, like the fence's: the
 * request itself is read from the plane's table (drain_requests), which anyone who can NOTIFY cannot write.
 */
export function drainChannel(afterlifeSchema: string): string {
  return `${afterlifeSchema}_drain`.slice(0, 63);
}
