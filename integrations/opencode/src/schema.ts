// JSON Schema (as `cos mcp` lists its tools) → the Zod shapes OpenCode's `tool()` takes.
// OpenCode turns the Zod shape back into JSON Schema for the model and validates calls
// with it, so the conversion keeps every constraint `cos` states: types, enums, bounds,
// lengths, required keys and closed objects.

import { z } from "zod";

// The same zod (pinned to the version `@opencode-ai/plugin` uses) that `tool.schema` exposes.
type ZodType = z.ZodType;
type Json = Record<string, unknown>;

/** A schema this converter cannot express faithfully. */
export class SchemaError extends Error {
  constructor(where: string, message: string) {
    super(`${where}: ${message}`);
    this.name = "SchemaError";
  }
}

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function describe<T extends ZodType>(schema: T, node: Json): T {
  return typeof node.description === "string" ? (schema.describe(node.description) as T) : schema;
}

function num(node: Json, key: string): number | undefined {
  return typeof node[key] === "number" ? (node[key] as number) : undefined;
}

function stringSchema(node: Json, where: string): ZodType {
  if (Array.isArray(node.enum)) {
    const values = node.enum;
    if (values.length === 0 || !values.every((v) => typeof v === "string")) {
      throw new SchemaError(where, "string enum must list strings");
    }
    return z.enum(values as [string, ...string[]]);
  }
  let s = z.string();
  const min = num(node, "minLength");
  const max = num(node, "maxLength");
  if (min !== undefined) s = s.min(min);
  if (max !== undefined) s = s.max(max);
  if (typeof node.pattern === "string") s = s.regex(new RegExp(node.pattern, "u"));
  return s;
}

function numberSchema(node: Json, integer: boolean): ZodType {
  let n = integer ? z.number().int() : z.number();
  const min = num(node, "minimum");
  const max = num(node, "maximum");
  const xmin = num(node, "exclusiveMinimum");
  const xmax = num(node, "exclusiveMaximum");
  if (min !== undefined) n = n.gte(min);
  if (max !== undefined) n = n.lte(max);
  if (xmin !== undefined) n = n.gt(xmin);
  if (xmax !== undefined) n = n.lt(xmax);
  return n;
}

function arraySchema(node: Json, where: string): ZodType {
  const items = isObject(node.items) ? toZod(node.items, `${where}[]`) : z.unknown();
  let a = z.array(items);
  const min = num(node, "minItems");
  const max = num(node, "maxItems");
  if (min !== undefined) a = a.min(min);
  if (max !== undefined) a = a.max(max);
  return a;
}

/** The Zod shape (property → schema) of an object schema; optional unless required. */
export function objectShape(node: Json, where = "schema"): Record<string, ZodType> {
  const props = isObject(node.properties) ? node.properties : {};
  const required = new Set(Array.isArray(node.required) ? node.required.filter((r) => typeof r === "string") : []);
  const shape: Record<string, ZodType> = {};
  for (const [key, sub] of Object.entries(props)) {
    if (!isObject(sub)) throw new SchemaError(`${where}.${key}`, "property schema is not an object");
    const s = toZod(sub, `${where}.${key}`);
    shape[key] = required.has(key) ? s : (s.optional());
  }
  for (const key of required) {
    if (!(key in shape)) throw new SchemaError(where, `required property ${JSON.stringify(key)} has no schema`);
  }
  return shape;
}

function objectSchema(node: Json, where: string): ZodType {
  const obj = z.object(objectShape(node, where));
  if (node.additionalProperties === false) return obj.strict();
  if (isObject(node.additionalProperties)) {
    return obj.catchall(toZod(node.additionalProperties, `${where}.*`));
  }
  return obj.passthrough();
}

function union(options: unknown[], where: string): ZodType {
  const parts = options.map((o, i) => {
    if (!isObject(o)) throw new SchemaError(`${where}|${i}`, "variant is not an object");
    return toZod(o, `${where}|${i}`);
  });
  if (parts.length === 0) throw new SchemaError(where, "empty anyOf/oneOf");
  if (parts.length === 1) return parts[0];
  return z.union(parts as [ZodType, ZodType, ...ZodType[]]);
}

/** One JSON Schema node → Zod. */
export function toZod(node: Json, where = "schema"): ZodType {
  if ("const" in node) {
    const c = node.const;
    if (c === null || ["string", "number", "boolean"].includes(typeof c)) {
      return describe(z.literal(c as string | number | boolean | null), node);
    }
    throw new SchemaError(where, "const must be a primitive");
  }
  if (Array.isArray(node.anyOf)) return describe(union(node.anyOf, where), node);
  if (Array.isArray(node.oneOf)) return describe(union(node.oneOf, where), node);
  if (Array.isArray(node.type)) {
    const variants = node.type.map((t) => ({ ...node, type: t }));
    return describe(union(variants, where), node);
  }
  if (Array.isArray(node.enum) && node.type === undefined) {
    const values = node.enum;
    if (values.length > 0 && values.every((v) => typeof v === "string")) {
      return describe(z.enum(values as [string, ...string[]]), node);
    }
    return describe(union(values.map((v) => ({ const: v })), where), node);
  }
  switch (node.type) {
    case "string":
      return describe(stringSchema(node, where), node);
    case "integer":
      return describe(numberSchema(node, true), node);
    case "number":
      return describe(numberSchema(node, false), node);
    case "boolean":
      return describe(z.boolean(), node);
    case "null":
      return describe(z.null(), node);
    case "array":
      return describe(arraySchema(node, where), node);
    case "object":
      return describe(objectSchema(node, where), node);
    case undefined:
      return describe(z.unknown(), node);
    default:
      throw new SchemaError(where, `unsupported type ${JSON.stringify(node.type)}`);
  }
}
