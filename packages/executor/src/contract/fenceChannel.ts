/**
 * The channel on which a declaration of death is announced, so the executor (if alive after all) asks its
 * records. Here, below both, because the registry's statement sends on it and the kit's liveness listens.
 */
export function fenceChannel(afterlifeSchema: string): string {
  return `${afterlifeSchema}_fence`.slice(0, 63);
}
