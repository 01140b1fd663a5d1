// `@createos/opencode/rpc`: the plugin's RPC contract, importable without the implementation
// (this module loads nothing but zod and starts nothing). A V2 host registers it with
// `ctx.rpc.register(CreateOS, handlers)`; clients call it through `client.rpc(CreateOS)`.
// Schemas are zod objects, which are Standard Schema validators, so a host validates
// inputs and outputs with them and a typed client infers every method from them.
//
//   import { CreateOS } from "@createos/opencode/rpc";
//   const sandbox = client.rpc(CreateOS);
//   await sandbox.status({ sessionID });
//   await sandbox.binding({ sessionID });
//   await sandbox.release({ sessionID, destroy: true }); // destroy: false only forgets

import { z } from "zod";

/** RPC id. */
export const RPC_ID = "createos";

const sessionID = z.string().min(1).describe("The OpenCode session.");

/** Input of `status` and `binding`. */
export const SessionInput = z.object({ sessionID }).strict();

/** The session's binding to its sandbox. */
export const Binding = z
  .object({
    sessionID: z.string(),
    /** The sandbox `cos mcp` has bound to the session now, if any. */
    sandbox: z.string().nullable(),
    /** A persisted binding not reattached yet (it is on the next call). */
    stored: z.string().nullable(),
    /** Created for the session, so releasing it destroys it. */
    owned: z.boolean().nullable(),
    /** The binding the host's durable storage holds for the session, when the host has one. */
    host: z.string().nullable(),
  })
  .strict();

/** What `status` reports. */
export const Status = z
  .object({
    sessionID: z.string(),
    mode: z.enum(["local", "remote"]),
    sandbox: z.string().nullable(),
    stored: z.string().nullable(),
    owned: z.boolean().nullable(),
    /** The session's sandbox is being created. */
    initializing: z.boolean(),
    /** Guest working directory. */
    cwd: z.string(),
    persist: z.boolean(),
    /** The session's calls in flight. */
    inFlight: z.number().int().min(0),
  })
  .strict();

/** Input of `release`. */
export const ReleaseInput = z.object({ sessionID, destroy: z.boolean().describe("Destroy the sandbox (true) or only forget the binding (false).") }).strict();

/** What `release` did. */
export const ReleaseResult = z
  .object({
    /** A binding was dropped. */
    released: z.boolean(),
    sandbox: z.string().nullable(),
    destroyed: z.boolean(),
  })
  .strict();

const SessionError = z.object({ sessionID: z.string() }).strict();

/** Typed errors: the session does not exist or is not this plugin's location; a refused release. */
export const Errors = {
  session_unavailable: SessionError,
  location_mismatch: SessionError,
  release_failed: z.object({ sessionID: z.string(), destroy: z.boolean() }).strict(),
} as const;

/** The contract. */
export const CreateOS = {
  id: RPC_ID,
  events: {},
  methods: {
    status: {
      input: SessionInput,
      output: Status,
      errors: { session_unavailable: Errors.session_unavailable, location_mismatch: Errors.location_mismatch },
    },
    binding: {
      input: SessionInput,
      output: Binding,
      errors: { session_unavailable: Errors.session_unavailable, location_mismatch: Errors.location_mismatch },
    },
    release: {
      input: ReleaseInput,
      output: ReleaseResult,
      errors: Errors,
    },
  },
} as const;

export type CreateOSContract = typeof CreateOS;
export type CreateOSMethod = keyof CreateOSContract["methods"];
export type CreateOSStatus = z.output<typeof Status>;
export type CreateOSBinding = z.output<typeof Binding>;
export type CreateOSRelease = z.output<typeof ReleaseResult>;
export type CreateOSErrorType = keyof typeof Errors;

/** The input of a method. */
export type CreateOSInput<M extends CreateOSMethod> = z.input<CreateOSContract["methods"][M]["input"]>;
/** The output of a method. */
export type CreateOSOutput<M extends CreateOSMethod> = z.output<CreateOSContract["methods"][M]["output"]>;

/** What a typed client of the contract looks like (`client.rpc(CreateOS)`). */
export type CreateOSClient = { [M in CreateOSMethod]: (input: CreateOSInput<M>) => Promise<CreateOSOutput<M>> };

/** The handlers a host registers for the contract. */
export type CreateOSHandlers<Ctx = unknown> = {
  [M in CreateOSMethod]: (input: CreateOSInput<M>, context: Ctx) => Promise<CreateOSOutput<M>>;
};
