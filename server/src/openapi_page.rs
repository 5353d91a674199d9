//! `GET /api/docs`: the OpenAPI document (`openapi/`) rendered on the server as one HTML
//! page — operations by tag with their parameters, body and answers, then every schema with
//! its properties. No script and nothing from another site (the page uses the app's own
//! stylesheet, as the Content-Security-Policy requires), so it works on an air-gapped site.

use std::fmt::Write as _;

use serde_json::Value;
use utoipa::openapi::OpenApi;

use crate::auth::middleware::html_escape as esc;

const METHODS: [&str; 5] = ["get", "post", "put", "delete", "patch"];

/// The page for `doc`.
pub fn render(doc: &OpenApi) -> String {
    let v = serde_json::to_value(doc).unwrap_or(Value::Null);
    let mut out = String::with_capacity(64 * 1024);
    let title = v["info"]["title"].as_str().unwrap_or("API");
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\
         <link rel=\"stylesheet\" href=\"/pkg/redrive.css\"></head><body><main class=\"api-docs\">\
         <h1>{t} {ver}</h1><p>{desc}</p><p>OpenAPI {oa} document: <a href=\"{doc_path}\">\
         {doc_path}</a>. Authenticate with <code>Authorization: Bearer rdv_...</code> (an API \
         token) or a signed-in session. <a href=\"/\">Back to the dead letters</a>.</p>",
        t = esc(title),
        ver = esc(v["info"]["version"].as_str().unwrap_or("")),
        desc = esc(v["info"]["description"].as_str().unwrap_or("")),
        oa = esc(v["openapi"].as_str().unwrap_or("")),
        doc_path = crate::openapi::DOCUMENT_PATH,
    );

    // Operations, grouped by their first tag in the document's tag order.
    let empty = serde_json::Map::new();
    let paths = v["paths"].as_object().unwrap_or(&empty);
    let tags: Vec<String> = v["tags"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    out.push_str("<nav><h2>Operations</h2><ul>");
    for tag in &tags {
        let _ = write!(
            out,
            "<li><a href=\"#tag-{id}\">{t}</a></li>",
            id = anchor(tag),
            t = esc(tag)
        );
    }
    out.push_str("<li><a href=\"#schemas\">Schemas</a></li></ul></nav>");
    for tag in &tags {
        let _ = write!(
            out,
            "<section id=\"tag-{}\"><h2>{}</h2>",
            anchor(tag),
            esc(tag)
        );
        for (path, item) in paths {
            for method in METHODS {
                let Some(op) = item.get(method) else { continue };
                let first_tag = op["tags"][0].as_str().unwrap_or("");
                if first_tag != tag {
                    continue;
                }
                operation(&mut out, method, path, op);
            }
        }
        out.push_str("</section>");
    }

    out.push_str("<section id=\"schemas\"><h2>Schemas</h2>");
    if let Some(schemas) = v["components"]["schemas"].as_object() {
        for (name, schema) in schemas {
            let _ = write!(out, "<h3 id=\"schema-{}\">{}</h3>", anchor(name), esc(name));
            schema_block(&mut out, schema);
        }
    }
    out.push_str("</section></main></body></html>");
    out
}

fn anchor(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

fn operation(out: &mut String, method: &str, path: &str, op: &Value) {
    let _ = write!(
        out,
        "<article id=\"op-{id}\"><h3><code>{m} {p}</code></h3><p>{s}</p><p>{d}</p>",
        id = anchor(op["operationId"].as_str().unwrap_or(path)),
        m = method.to_uppercase(),
        p = esc(path),
        s = esc(op["summary"].as_str().unwrap_or("")),
        d = esc(op["description"].as_str().unwrap_or("")),
    );
    if let Some(params) = op["parameters"].as_array().filter(|p| !p.is_empty()) {
        out.push_str(
            "<table><thead><tr><th>parameter</th><th>in</th><th>type</th><th>required</th>\
             <th>what</th></tr></thead><tbody>",
        );
        for p in params {
            let _ = write!(
                out,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(p["name"].as_str().unwrap_or("")),
                esc(p["in"].as_str().unwrap_or("")),
                type_of(&p["schema"]),
                if p["required"].as_bool().unwrap_or(false) {
                    "yes"
                } else {
                    "no"
                },
                esc(p["description"].as_str().unwrap_or("")),
            );
        }
        out.push_str("</tbody></table>");
    }
    if let Some(body) = op.get("requestBody") {
        let schema = &body["content"]["application/json"]["schema"];
        let _ = write!(
            out,
            "<p>Body (JSON{}): {}</p>",
            if body["required"].as_bool().unwrap_or(false) {
                ", required"
            } else {
                ", optional"
            },
            type_of(schema)
        );
    }
    if let Some(responses) = op["responses"].as_object() {
        out.push_str("<table><thead><tr><th>status</th><th>answer</th></tr></thead><tbody>");
        for (status, r) in responses {
            let content = r["content"]
                .as_object()
                .and_then(|c| c.iter().next())
                .map(|(media, c)| format!("{} {}", esc(media), type_of(&c["schema"])))
                .unwrap_or_default();
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{} {}</td></tr>",
                esc(status),
                esc(r["description"].as_str().unwrap_or("")),
                content
            );
        }
        out.push_str("</tbody></table>");
    }
    out.push_str("</article>");
}

/// A schema's type as short HTML: a link for a reference, `array of ...`, a list of enum
/// values, `one of ...`.
fn type_of(schema: &Value) -> String {
    if let Some(r) = schema["$ref"].as_str() {
        let name = r.rsplit('/').next().unwrap_or(r);
        return format!("<a href=\"#schema-{}\">{}</a>", anchor(name), esc(name));
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        if let Some(items) = schema[key].as_array() {
            let parts: Vec<String> = items.iter().map(type_of).collect();
            let word = match key {
                "oneOf" => "one of",
                "anyOf" => "any of",
                _ => "all of",
            };
            return format!("{word} ({})", parts.join(", "));
        }
    }
    if let Some(values) = schema["enum"].as_array() {
        let v: Vec<String> = values
            .iter()
            .map(|v| format!("<code>{}</code>", esc(&v.to_string())))
            .collect();
        return v.join(" | ");
    }
    let ty = match &schema["type"] {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .filter_map(|t| t.as_str())
            .collect::<Vec<_>>()
            .join(" or "),
        _ => String::new(),
    };
    if ty.starts_with("array") {
        return format!("array of {}", type_of(&schema["items"]));
    }
    if ty.is_empty() {
        return "any".into();
    }
    let mut t = esc(&ty);
    if let Some(f) = schema["format"].as_str() {
        let _ = write!(t, " ({})", esc(f));
    }
    t
}

fn schema_block(out: &mut String, schema: &Value) {
    if let Some(d) = schema["description"].as_str() {
        let _ = write!(out, "<p>{}</p>", esc(d));
    }
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    if let Some(props) = schema["properties"].as_object() {
        out.push_str(
            "<table><thead><tr><th>field</th><th>type</th><th>required</th><th>what</th></tr>\
             </thead><tbody>",
        );
        for (name, p) in props {
            let _ = write!(
                out,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(name),
                type_of(p),
                if required.contains(&name.as_str()) {
                    "yes"
                } else {
                    "no"
                },
                esc(p["description"].as_str().unwrap_or("")),
            );
        }
        out.push_str("</tbody></table>");
    } else {
        let _ = write!(out, "<p>{}</p>", type_of(schema));
    }
    for key in ["allOf", "oneOf"] {
        if let Some(parts) = schema[key].as_array() {
            for p in parts {
                if p.get("$ref").is_none() {
                    schema_block(out, p);
                } else {
                    let _ = write!(out, "<p>and {}</p>", type_of(p));
                }
            }
        }
    }
}
