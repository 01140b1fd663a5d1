//! `api-spec/openapi.yaml` loaded for checking: operations by operationId, their
//! responses with `$ref`s followed, and JSON Schema 2020-12 validators for the schemas
//! (compiled against a root that carries the spec's `components`, so every `#/components/…`
//! reference inside a schema resolves).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde_json::Value;

const METHODS: &[&str] = &["get", "put", "post", "patch", "delete"];

/// One operation of the spec.
#[derive(Debug, Clone)]
pub struct Operation {
    pub id: String,
    pub method: String,
    /// Path template, e.g. `/v1/sandboxes/{id}/processes/{process_id}`.
    pub path: String,
    /// Status key (`"200"`, `"default"`) → response object with `$ref`s followed.
    pub responses: BTreeMap<String, Value>,
    /// The request body's media types (empty without a body).
    pub request_media: Vec<String>,
    pub request_required: bool,
    /// The schema of an `application/json` request body.
    pub request_schema: Option<Value>,
    /// `security: []`: no credential needed.
    pub public: bool,
    /// `x-delegated-token: true`.
    pub delegated: bool,
    pub upgrade: Option<String>,
    /// Names of the query parameters.
    pub query_params: Vec<String>,
}

impl Operation {
    pub fn lists(&self, status: u16) -> bool {
        self.responses.contains_key(&status.to_string())
    }

    pub fn path_params(&self) -> Vec<String> {
        self.path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(str::to_string)
            .collect()
    }

    pub fn takes_json(&self) -> bool {
        self.request_media.iter().any(|m| m == "application/json")
    }

    /// The response object for `status`: its own entry, else `default` for 5xx.
    pub fn response(&self, status: u16) -> Option<&Value> {
        self.responses.get(&status.to_string()).or_else(|| {
            if status >= 500 {
                self.responses.get("default")
            } else {
                None
            }
        })
    }
}

pub struct Spec {
    doc: Value,
    ops: BTreeMap<String, Operation>,
    validators: Mutex<HashMap<String, Arc<jsonschema::Validator>>>,
}

impl Spec {
    pub fn load() -> Spec {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../api-spec/openapi.yaml");
        let text = std::fs::read_to_string(path).expect("api-spec/openapi.yaml");
        let doc: Value = serde_yaml::from_str(&text).expect("the spec is YAML with string keys");
        let mut spec = Spec {
            doc,
            ops: BTreeMap::new(),
            validators: Mutex::new(HashMap::new()),
        };
        spec.ops = spec.index_operations();
        spec
    }

    fn index_operations(&self) -> BTreeMap<String, Operation> {
        let mut ops = BTreeMap::new();
        let paths = self.doc["paths"].as_object().expect("paths");
        for (path, item) in paths {
            for method in METHODS {
                let Some(op) = item.get(*method) else {
                    continue;
                };
                let id = op["operationId"].as_str().expect("operationId").to_string();
                let responses = op["responses"]
                    .as_object()
                    .expect("responses")
                    .iter()
                    .map(|(code, r)| (code.clone(), self.resolve(r).clone()))
                    .collect();
                let body = op.get("requestBody").map(|b| self.resolve(b));
                let request_media = body
                    .and_then(|b| b["content"].as_object())
                    .map(|c| c.keys().cloned().collect())
                    .unwrap_or_default();
                let operation = Operation {
                    id: id.clone(),
                    method: method.to_uppercase(),
                    path: path.clone(),
                    responses,
                    request_media,
                    request_required: body.and_then(|b| b["required"].as_bool()).unwrap_or(false),
                    request_schema: body
                        .and_then(|b| b["content"]["application/json"].get("schema"))
                        .cloned(),
                    public: op
                        .get("security")
                        .and_then(Value::as_array)
                        .is_some_and(|s| s.is_empty()),
                    delegated: op["x-delegated-token"].as_bool().unwrap_or(false),
                    upgrade: op["x-upgrade"].as_str().map(str::to_string),
                    query_params: self.query_params(item, op),
                };
                assert!(
                    ops.insert(id.clone(), operation).is_none(),
                    "operationId {id} twice"
                );
            }
        }
        ops
    }

    fn query_params(&self, item: &Value, op: &Value) -> Vec<String> {
        let listed = item["parameters"]
            .as_array()
            .into_iter()
            .chain(op["parameters"].as_array())
            .flatten();
        listed
            .map(|p| self.resolve(p))
            .filter(|p| p["in"] == "query")
            .filter_map(|p| p["name"].as_str().map(str::to_string))
            .collect()
    }

    pub fn operations(&self) -> impl Iterator<Item = &Operation> {
        self.ops.values()
    }

    pub fn op(&self, id: &str) -> &Operation {
        self.ops
            .get(id)
            .unwrap_or_else(|| panic!("no operation {id} in the spec"))
    }

    /// Follows `$ref` chains (local references only).
    pub fn resolve<'a>(&'a self, mut v: &'a Value) -> &'a Value {
        for _ in 0..16 {
            let Some(r) = v.get("$ref").and_then(Value::as_str) else {
                return v;
            };
            let pointer = r
                .strip_prefix('#')
                .unwrap_or_else(|| panic!("non-local $ref {r}"));
            v = self
                .doc
                .pointer(pointer)
                .unwrap_or_else(|| panic!("$ref {r} does not resolve"));
        }
        panic!("$ref chain too long at {v}");
    }

    /// Validates `instance` against `schema` (a spec schema, possibly a `$ref`); the
    /// error lists every violation with its location.
    pub fn validate(&self, schema: &Value, instance: &Value) -> Result<(), String> {
        let validator = self.validator(schema);
        let errors: Vec<String> = validator
            .iter_errors(instance)
            .map(|e| format!("{} (at '{}')", e, e.instance_path()))
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    fn validator(&self, schema: &Value) -> Arc<jsonschema::Validator> {
        let key = serde_json::to_string(schema).expect("schema serializes");
        let mut cache = self.validators.lock().unwrap();
        if let Some(v) = cache.get(&key) {
            return Arc::clone(v);
        }
        let mut root = match schema {
            Value::Object(_) => schema.clone(),
            other => panic!("schema is not an object: {other}"),
        };
        root["components"] = self.doc["components"].clone();
        let validator = jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(&root)
            .unwrap_or_else(|e| panic!("schema {key} does not compile: {e}"));
        let validator = Arc::new(validator);
        cache.insert(key, Arc::clone(&validator));
        validator
    }
}

#[test]
fn the_spec_loads_and_its_schemas_compile() {
    let spec = Spec::load();
    assert_eq!(spec.operations().count(), 107);
    // Every response schema of every operation compiles.
    for op in spec.operations() {
        for response in op.responses.values() {
            for media in response["content"]
                .as_object()
                .into_iter()
                .flat_map(|c| c.values())
            {
                spec.validator(&media["schema"]);
            }
        }
    }
    let fail = spec.op("getSandbox").response(404).unwrap()["content"]["application/json"]
        ["schema"]
        .clone();
    assert!(spec
        .validate(
            &fail,
            &serde_json::json!({"status": "fail", "data": {"sandbox": "sandbox not found"}})
        )
        .is_ok());
    assert!(spec
        .validate(&fail, &serde_json::json!({"status": "success", "data": {}}))
        .is_err());
}
