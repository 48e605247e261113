/** Polls `probe` every 100 ms until it answers something other than undefined; throws after `ms`. */
export async function until<T>(probe: () => Promise<T | undefined>, ms = 30_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
