// Session bindings in the host's durable storage. `cos mcp` keeps every binding in its state
// directory (that is what reattaches a session after a restart, and the only store when the
// host offers none). A V2 host offers plugin storage (`ctx.storage.get/set/remove`); there the
// plugin also records each session's sandbox, scoped by location and session id as the V2
// plugin stored them (plugins.md §2.5), so the binding survives a lost or different cos state
// directory: `binding` reports it, and deleting the session destroys it even when cos no
// longer knows it.

import { createHash } from "node:crypto";

/** The key/value storage a V2 host offers. */
export interface HostStorage {
  get(key: string): Promise<unknown> | unknown;
  set(key: string, value: unknown): Promise<unknown> | unknown;
  remove(key: string): Promise<unknown> | unknown;
}

/** One stored binding. */
export interface HostBinding {
  sandbox: string;
  owned: boolean;
}

/** Does `storage` look like a usable host storage? */
export function isHostStorage(storage: unknown): storage is HostStorage {
  const s = storage as Partial<HostStorage> | undefined;
  return typeof s?.get === "function" && typeof s.set === "function" && typeof s.remove === "function";
}

const SANDBOX_ID = /^[a-zA-Z0-9][a-zA-Z0-9_.:-]*$/;

/** The bindings of one project directory in host storage. */
export class HostBindings {
  private readonly prefix: string;
  /** What was last written per session (saves a storage write per call). */
  private readonly known = new Map<string, string | null>();

  constructor(
    private readonly storage: HostStorage,
    project: string,
    private readonly log: (msg: string) => void = () => {},
  ) {
    this.prefix = `createos/v1/${createHash("sha256").update(project).digest("hex")}/`;
  }

  private key(session: string): string {
    return this.prefix + encodeURIComponent(session);
  }

  /** The stored binding of `session`; a malformed value counts as none. */
  async get(session: string): Promise<HostBinding | undefined> {
    try {
      const v = (await this.storage.get(this.key(session))) as Partial<HostBinding> | undefined | null;
      if (v && typeof v.sandbox === "string" && SANDBOX_ID.test(v.sandbox) && typeof v.owned === "boolean") {
        return { sandbox: v.sandbox, owned: v.owned };
      }
    } catch (err) {
      this.log(`reading the stored binding of session ${session} failed: ${(err as Error).message}`);
    }
    return undefined;
  }

  /** Record (or, with `sandbox: null`, drop) the binding of `session`. */
  async put(session: string, binding: HostBinding | null): Promise<void> {
    const id = binding?.sandbox ?? null;
    if (this.known.has(session) && this.known.get(session) === id) return;
    try {
      if (binding) await this.storage.set(this.key(session), { sandbox: binding.sandbox, owned: binding.owned });
      else await this.storage.remove(this.key(session));
      this.known.set(session, id);
    } catch (err) {
      this.log(`storing the binding of session ${session} failed: ${(err as Error).message}`);
    }
  }

  /** Bring the stored record in line with a `sandbox_status` answer. */
  async sync(session: string, status: Record<string, unknown>): Promise<void> {
    // Only a live binding is recorded; dropping happens on release and session deletion, so
    // a record outlives a cos state directory that lost it.
    if (typeof status.sandbox === "string") {
      await this.put(session, { sandbox: status.sandbox, owned: status.owned === true });
    }
  }

  /** The sandbox last recorded for `session` in this process, if any (no storage read). */
  recorded(session: string): string | null | undefined {
    return this.known.get(session);
  }
}
