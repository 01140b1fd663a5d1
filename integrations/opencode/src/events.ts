// OpenCode's session-deleted event, in the shapes its published types give it
// (`@opencode-ai/sdk` 1.18.33):
//   - `dist/gen/types.gen.d.ts`, `EventSessionDeleted`: `type: "session.deleted"` with the
//     deleted `Session` as `properties.info` (its id is `info.id`): what the classic `event`
//     hook of `@opencode-ai/plugin` (`Hooks.event`, input `{ event: Event }`) receives;
//   - `dist/v2/gen/types.gen.d.ts`, `EventSessionDeleted` (the same, plus
//     `properties.sessionID`) and `SessionDeleted` (`data.sessionID` and `data.info`): what a
//     V2 event subscription yields.

/** The event type. */
export const SESSION_DELETED = "session.deleted";

function str(v: unknown): string | undefined {
  return typeof v === "string" && v !== "" ? v : undefined;
}

/** The id of the session a `session.deleted` event names, else undefined. */
export function deletedSessionId(event: unknown): string | undefined {
  if (typeof event !== "object" || event === null) return undefined;
  const e = event as { type?: unknown; properties?: unknown; data?: unknown };
  if (e.type !== SESSION_DELETED) return undefined;
  for (const body of [e.properties, e.data]) {
    if (typeof body !== "object" || body === null) continue;
    const b = body as { sessionID?: unknown; info?: { id?: unknown } | null };
    const id = str(b.sessionID) ?? str(b.info?.id);
    if (id) return id;
  }
  return undefined;
}
