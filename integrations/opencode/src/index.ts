// @createos/opencode: CreateOS sandboxes in OpenCode over the `cos mcp` sidecar.
//
// The default export carries both entries: `server` for the published OpenCode plugin API
// (opencode-ai on npm) and `id` + `setup` for the V2 API (plugins.md §4), so one package
// loads in both.

import { CreateOSPlugin } from "./classic.js";
import { PLUGIN_ID } from "./core.js";
import { setup } from "./v2.js";

export { CreateOSPlugin } from "./classic.js";
export { setup } from "./v2.js";
export { PLUGIN_ID } from "./core.js";
export { cosBinary, platformPackage } from "./binary.js";
export { resolveOptions, OptionsError, type PluginConfig } from "./options.js";

const plugin = { id: PLUGIN_ID, server: CreateOSPlugin, setup };
export default plugin;
