import assert from "node:assert/strict";
import { test } from "node:test";

import { z } from "zod";
import { objectShape, toZod } from "../dist/schema.js";

const exec = {
  type: "object",
  properties: {
    command: { type: "string", minLength: 1, description: "Shell command line." },
    timeout: { type: "integer", minimum: 0, maximum: 3600000 },
    mode: { type: "string", enum: ["once", "one-way"] },
    rules: { type: "array", minItems: 1, items: { type: "string", minLength: 1 } },
    keep: { type: "boolean" },
  },
  required: ["command"],
  additionalProperties: false,
};

test("required and optional properties, bounds, enums, arrays", () => {
  const schema = z.object(objectShape(exec));
  assert.equal(schema.safeParse({ command: "ls" }).success, true);
  assert.equal(schema.safeParse({}).success, false, "command is required");
  assert.equal(schema.safeParse({ command: "" }).success, false, "minLength");
  assert.equal(schema.safeParse({ command: "ls", timeout: 1.5 }).success, false, "integer");
  assert.equal(schema.safeParse({ command: "ls", timeout: -1 }).success, false, "minimum");
  assert.equal(schema.safeParse({ command: "ls", timeout: 3600001 }).success, false, "maximum");
  assert.equal(schema.safeParse({ command: "ls", mode: "two-way" }).success, false, "enum");
  assert.equal(schema.safeParse({ command: "ls", mode: "once", rules: [] }).success, false, "minItems");
  assert.equal(schema.safeParse({ command: "ls", rules: ["10.0.0.0/8"], keep: true }).success, true);
});

test("descriptions survive and the JSON Schema for the model keeps the constraints", () => {
  const json = z.toJSONSchema(z.object(objectShape(exec)));
  assert.deepEqual(json.required, ["command"]);
  assert.equal(json.properties.command.description, "Shell command line.");
  assert.equal(json.properties.command.minLength, 1);
  assert.equal(json.properties.timeout.maximum, 3600000);
  assert.deepEqual(json.properties.mode.enum, ["once", "one-way"]);
});

test("nested closed objects, unions, nullable types and const", () => {
  const nested = toZod({ type: "object", properties: { a: { type: "string" } }, required: ["a"], additionalProperties: false });
  assert.equal(nested.safeParse({ a: "x" }).success, true);
  assert.equal(nested.safeParse({ a: "x", b: 1 }).success, false, "closed object");
  const nullable = toZod({ type: ["string", "null"] });
  assert.equal(nullable.safeParse(null).success, true);
  assert.equal(nullable.safeParse(3).success, false);
  const any = toZod({ anyOf: [{ type: "integer" }, { const: "all" }] });
  assert.equal(any.safeParse("all").success, true);
  assert.equal(any.safeParse("some").success, false);
});

test("schemas that cannot be expressed are refused, not loosened", () => {
  assert.throws(() => toZod({ type: "tuple" }, "t"), /t: unsupported type "tuple"/);
  assert.throws(() => objectShape({ type: "object", properties: {}, required: ["x"] }, "tool"), /required property "x" has no schema/);
});
