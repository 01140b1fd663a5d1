// Type-level checks of the RPC contract, compiled (never run) by rpc.test.mjs with
// `tsc -p test/tsconfig.json`: the published declarations of `@createos/opencode/rpc` give a
// typed client, both through the exported client type and through Standard Schema inference
// from the contract itself (what a host's `client.rpc(CreateOS)` does). Each
// `@ts-expect-error` line must be an error, so a loosened type fails the compile.

import { CreateOS, type CreateOSBinding, type CreateOSClient, type CreateOSRelease, type CreateOSStatus } from "../dist/rpc.js";

declare const client: CreateOSClient;

export async function exported(): Promise<void> {
  const s: CreateOSStatus = await client.status({ sessionID: "ses_1" });
  const mode: "local" | "remote" = s.mode;
  const sandbox: string | null = s.sandbox;
  const b: CreateOSBinding = await client.binding({ sessionID: "ses_1" });
  const host: string | null = b.host;
  const r: CreateOSRelease = await client.release({ sessionID: "ses_1", destroy: false });
  const destroyed: boolean = r.destroyed;
  void [mode, sandbox, host, destroyed];
  // @ts-expect-error release needs `destroy`
  await client.release({ sessionID: "ses_1" });
  // @ts-expect-error there is no such method
  await client.destroy({ sessionID: "ses_1" });
  // @ts-expect-error the sandbox is a string or null
  const wrong: number = s.sandbox;
  // @ts-expect-error the session id is a string
  await client.status({ sessionID: 7 });
  void wrong;
}

/** What a Standard Schema aware host infers from a schema. */
type Infer<S, K extends "input" | "output"> = S extends { readonly "~standard": { readonly types?: infer T } }
  ? NonNullable<T> extends { readonly [P in K]: infer V }
    ? V
    : never
  : never;

type Methods = (typeof CreateOS)["methods"];
type Inferred = {
  [M in keyof Methods]: (input: Infer<Methods[M]["input"], "input">) => Promise<Infer<Methods[M]["output"], "output">>;
};

declare const inferred: Inferred;

export async function fromTheContract(): Promise<void> {
  const s = await inferred.status({ sessionID: "ses_1" });
  const initializing: boolean = s.initializing;
  const r = await inferred.release({ sessionID: "ses_1", destroy: true });
  const released: boolean = r.released;
  const b = await inferred.binding({ sessionID: "ses_1" });
  const owned: boolean | null = b.owned;
  void [initializing, released, owned];
  // @ts-expect-error inferred inputs are checked too
  await inferred.release({ sessionID: "ses_1", destroy: "yes" });
  // @ts-expect-error and outputs
  const n: string = s.inFlight;
  void n;
}
