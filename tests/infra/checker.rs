//! A static ownership check of a terraform tree: every root under `envs/` is evaluated with its
//! module calls (variables, locals, outputs, `file`/`jsondecode`/`concat`/`merge`), enough to
//! know which bucket each whole-document resource writes and which lifecycle rules it holds.
//! Anything it cannot evaluate is a finding of its own: the check fails closed.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use hcl::eval::{Context, Evaluate, FuncArgs, FuncDef, ParamType};
use hcl::{Block, Body, Expression, Map, Value};
use upcommit::domain::lifecycle::{self, Rule};

/// S3 configurations that one API call writes as a whole: two writers erase each other.
const WHOLE_DOCUMENT_TYPES: [&str; 14] = [
    "aws_s3_bucket_lifecycle_configuration",
    "aws_s3_bucket_policy",
    "aws_s3_bucket_cors_configuration",
    "aws_s3_bucket_notification",
    "aws_s3_bucket_ownership_controls",
    "aws_s3_bucket_public_access_block",
    "aws_s3_bucket_server_side_encryption_configuration",
    "aws_s3_bucket_versioning",
    "aws_s3_bucket_website_configuration",
    "aws_s3_bucket_logging",
    "aws_s3_bucket_replication_configuration",
    "aws_s3_bucket_acl",
    "aws_s3_bucket_accelerate_configuration",
    "aws_s3_bucket_object_lock_configuration",
];

/// Arguments of `aws_s3_bucket` that write the same documents inline.
const INLINE_DOCUMENTS: [(&str, &str); 7] = [
    ("lifecycle_rule", "aws_s3_bucket_lifecycle_configuration"),
    ("cors_rule", "aws_s3_bucket_cors_configuration"),
    ("policy", "aws_s3_bucket_policy"),
    ("versioning", "aws_s3_bucket_versioning"),
    (
        "server_side_encryption_configuration",
        "aws_s3_bucket_server_side_encryption_configuration",
    ),
    ("logging", "aws_s3_bucket_logging"),
    ("website", "aws_s3_bucket_website_configuration"),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Two resources write the same whole document of one bucket.
    TwoOwners,
    /// A versioned bucket's expiring rule has no noncurrent-version expiration beside it.
    UnpairedExpiry,
    /// A rule expiring current versions reaches a final-asset prefix.
    ExpiresFinal,
    /// Something the check needs could not be evaluated.
    Unresolved,
}

#[derive(Debug, Clone)]
pub struct Finding {
    pub kind: Kind,
    pub message: String,
}

/// One resource that writes a whole document of a bucket.
#[derive(Debug, Clone)]
pub struct Owner {
    pub address: String,
    pub document: String,
    /// `bucket@<address of its aws_s3_bucket>`, or `bucket:<name>` for a bucket named literally
    /// that the tree does not declare.
    pub bucket: String,
    /// The rules, for lifecycle configurations.
    pub rules: Vec<Rule>,
    /// The status, for versioning resources.
    pub status: Option<String>,
}

/// What one environment root holds.
#[derive(Debug, Default)]
pub struct Tree {
    pub owners: Vec<Owner>,
    /// `bucket:<name>` → `bucket@<address>` for every bucket whose name is known.
    pub bucket_names: HashMap<String, String>,
    pub findings: Vec<Finding>,
}

/// Checks every root under `<infra>/envs/`.
pub fn check(infra: &Path, final_prefixes: &[String]) -> BTreeMap<String, Tree> {
    let mut out = BTreeMap::new();
    let envs = std::fs::read_dir(infra.join("envs")).expect("an envs/ folder");
    let mut roots: Vec<PathBuf> = envs
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    roots.sort();
    for root in roots {
        let name = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut tree = Tree::default();
        if let Err(e) = evaluate_module(&root, "", Map::new(), &mut tree) {
            unresolved(&mut tree, e);
        }
        judge(&mut tree, final_prefixes);
        out.insert(name, tree);
    }
    out
}

fn unresolved(tree: &mut Tree, message: String) {
    tree.findings.push(Finding {
        kind: Kind::Unresolved,
        message,
    });
}

fn judge(tree: &mut Tree, final_prefixes: &[String]) {
    for o in &mut tree.owners {
        if let Some(address) = tree.bucket_names.get(&o.bucket) {
            o.bucket = address.clone();
        }
    }
    let mut by_document: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for o in &tree.owners {
        by_document
            .entry((o.document.clone(), o.bucket.clone()))
            .or_default()
            .push(o.address.clone());
    }
    for ((document, bucket), owners) in by_document {
        if owners.len() > 1 {
            tree.findings.push(Finding {
                kind: Kind::TwoOwners,
                message: format!(
                    "{document} of {bucket} has {} owners, each erasing the others' document: {}",
                    owners.len(),
                    owners.join(", ")
                ),
            });
        }
    }
    let versioned = |bucket: &str| {
        tree.owners.iter().any(|o| {
            o.document == "aws_s3_bucket_versioning"
                && o.bucket == bucket
                && o.status.as_deref() == Some("Enabled")
        })
    };
    let mut findings = Vec::new();
    for o in tree
        .owners
        .iter()
        .filter(|o| o.document == "aws_s3_bucket_lifecycle_configuration")
    {
        let mut problems = lifecycle::expiring_over_final(&o.rules, final_prefixes);
        if versioned(&o.bucket) {
            problems.extend(lifecycle::unpaired_expiry(&o.rules));
        }
        for p in problems {
            let kind = match p {
                lifecycle::Problem::ExpiresFinal { .. } => Kind::ExpiresFinal,
                _ => Kind::UnpairedExpiry,
            };
            findings.push(Finding {
                kind,
                message: format!("{}: {p}", o.address),
            });
        }
    }
    tree.findings.extend(findings);
}

/// The `.tf` files of one module folder, as one body.
fn load(dir: &Path) -> Result<Vec<Block>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "tf"))
        .collect();
    files.sort();
    let mut blocks = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        let body: Body = hcl::parse(&text).map_err(|e| format!("{}: {e}", f.display()))?;
        blocks.extend(body.into_blocks());
    }
    Ok(blocks)
}

fn label(block: &Block, i: usize) -> &str {
    block.labels().get(i).map(|l| l.as_str()).unwrap_or("")
}

fn attr<'a>(body: &'a Body, key: &str) -> Option<&'a Expression> {
    body.attributes().find(|a| a.key() == key).map(|a| a.expr())
}

fn functions(ctx: &mut Context) {
    fn file(args: FuncArgs) -> Result<Value, String> {
        let path = args[0].as_str().unwrap_or("");
        std::fs::read_to_string(path)
            .map(Value::from)
            .map_err(|e| format!("file({path}): {e}"))
    }
    fn jsondecode(args: FuncArgs) -> Result<Value, String> {
        serde_json::from_str(args[0].as_str().unwrap_or("")).map_err(|e| e.to_string())
    }
    fn concat(args: FuncArgs) -> Result<Value, String> {
        let mut out = Vec::new();
        for a in args.iter() {
            out.extend(a.as_array().ok_or("concat takes lists")?.iter().cloned());
        }
        Ok(Value::Array(out))
    }
    fn merge(args: FuncArgs) -> Result<Value, String> {
        let mut out = Map::new();
        for a in args.iter() {
            for (k, v) in a.as_object().ok_or("merge takes objects")? {
                out.insert(k.clone(), v.clone());
            }
        }
        Ok(Value::Object(out))
    }
    ctx.declare_func(
        "file",
        FuncDef::builder().param(ParamType::String).build(file),
    );
    ctx.declare_func(
        "jsondecode",
        FuncDef::builder()
            .param(ParamType::String)
            .build(jsondecode),
    );
    ctx.declare_func(
        "concat",
        FuncDef::builder()
            .variadic_param(ParamType::Any)
            .build(concat),
    );
    ctx.declare_func(
        "merge",
        FuncDef::builder()
            .variadic_param(ParamType::Any)
            .build(merge),
    );
}

/// The symbolic attributes of a resource or data source, for references to it: a bucket's `id`
/// and `bucket` are `bucket@<its address>`.
fn symbol(address: &str) -> Value {
    let id = format!("bucket@{address}");
    let mut m = Map::new();
    for key in ["id", "bucket"] {
        m.insert(key.to_owned(), Value::from(id.clone()));
    }
    for key in ["arn", "json", "name", "key_id"] {
        m.insert(key.to_owned(), Value::from(format!("{address}.{key}")));
    }
    Value::Object(m)
}

/// Evaluates one module instance (`prefix` is its address, `""` for the root) and collects its
/// owners into `tree`; returns its outputs.
fn evaluate_module(
    dir: &Path,
    prefix: &str,
    inputs: Map<String, Value>,
    tree: &mut Tree,
) -> Result<Map<String, Value>, String> {
    let dir = dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let blocks = load(&dir)?;
    let mut vars = Map::new();
    for b in blocks.iter().filter(|b| b.identifier() == "variable") {
        let name = label(b, 0).to_owned();
        let value = match inputs.get(&name) {
            Some(v) => v.clone(),
            None => match attr(b.body(), "default") {
                Some(e) => e
                    .evaluate(&Context::new())
                    .map_err(|e| format!("{prefix}var.{name} default: {e}"))?,
                None => Value::Null,
            },
        };
        vars.insert(name, value);
    }

    // Pending: locals, bucket names, module calls; resolved in rounds until nothing moves.
    let mut pending_locals: Vec<(String, &Expression)> = blocks
        .iter()
        .filter(|b| b.identifier() == "locals")
        .flat_map(|b| {
            b.body()
                .attributes()
                .map(|a| (a.key().to_owned(), a.expr()))
        })
        .collect();
    let mut pending_modules: Vec<&Block> = blocks
        .iter()
        .filter(|b| b.identifier() == "module")
        .collect();
    let mut locals = Map::new();
    let mut module_outputs = Map::new();

    let context = |locals: &Map<String, Value>, modules: &Map<String, Value>| -> Context<'static> {
        let mut ctx = Context::new();
        functions(&mut ctx);
        ctx.declare_var("var", Value::Object(vars.clone()));
        ctx.declare_var("local", Value::Object(locals.clone()));
        ctx.declare_var("module", Value::Object(modules.clone()));
        let mut path = Map::new();
        path.insert(
            "module".to_owned(),
            Value::from(dir.to_string_lossy().into_owned()),
        );
        ctx.declare_var("path", Value::Object(path));
        let mut resources: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
        let mut data: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
        for b in &blocks {
            let (kind, name) = (label(b, 0), label(b, 1));
            let address = format!("{prefix}{kind}.{name}");
            match b.identifier() {
                "resource" => {
                    resources
                        .entry(kind.to_owned())
                        .or_default()
                        .insert(name.to_owned(), symbol(&address));
                }
                "data" => {
                    data.entry(kind.to_owned())
                        .or_default()
                        .insert(name.to_owned(), symbol(&format!("data.{address}")));
                }
                _ => {}
            }
        }
        for (kind, m) in resources {
            ctx.declare_var(kind, Value::Object(m));
        }
        ctx.declare_var(
            "data",
            Value::Object(
                data.into_iter()
                    .map(|(k, m)| (k, Value::Object(m)))
                    .collect(),
            ),
        );
        ctx
    };

    loop {
        let mut moved = false;
        let ctx = context(&locals, &module_outputs);
        pending_locals.retain(|(name, expr)| match expr.evaluate(&ctx) {
            Ok(v) => {
                locals.insert(name.clone(), v);
                moved = true;
                false
            }
            Err(_) => true,
        });
        let mut ready = Vec::new();
        pending_modules.retain(|b| {
            let args: Result<Map<String, Value>, _> = b
                .body()
                .attributes()
                .filter(|a| {
                    !["source", "count", "for_each", "providers", "depends_on"].contains(&a.key())
                })
                .map(|a| a.expr().evaluate(&ctx).map(|v| (a.key().to_owned(), v)))
                .collect();
            match args {
                Ok(args) => {
                    ready.push((*b, args));
                    false
                }
                Err(_) => true,
            }
        });
        for (b, args) in ready {
            moved = true;
            let name = label(b, 0);
            let source = match attr(b.body(), "source").map(|e| e.evaluate(&ctx)) {
                Some(Ok(Value::String(s))) if s.starts_with('.') => s,
                other => {
                    return Err(format!(
                        "{prefix}module.{name}: source must be a local path, got {other:?}"
                    ))
                }
            };
            let outputs = evaluate_module(
                &dir.join(source),
                &format!("{prefix}module.{name}."),
                args,
                tree,
            )?;
            module_outputs.insert(name.to_owned(), Value::Object(outputs));
        }
        if !moved {
            break;
        }
    }
    let ctx = context(&locals, &module_outputs);
    if let Some((name, expr)) = pending_locals.first() {
        return Err(format!(
            "{prefix}local.{name}: {}",
            expr.evaluate(&ctx)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        ));
    }
    if let Some(b) = pending_modules.first() {
        return Err(format!(
            "{prefix}module.{}: an argument cannot be evaluated",
            label(b, 0)
        ));
    }

    for b in blocks.iter().filter(|b| b.identifier() == "resource") {
        collect_owner(b, prefix, &ctx, tree);
    }

    let mut outputs = Map::new();
    for b in blocks.iter().filter(|b| b.identifier() == "output") {
        if let Some(expr) = attr(b.body(), "value") {
            // An output nothing reads may stay unevaluated (say, a policy document's JSON).
            if let Ok(v) = expr.evaluate(&ctx) {
                outputs.insert(label(b, 0).to_owned(), v);
            }
        }
    }
    Ok(outputs)
}

fn collect_owner(b: &Block, prefix: &str, ctx: &Context, tree: &mut Tree) {
    let (kind, name) = (label(b, 0), label(b, 1));
    let address = format!("{prefix}{kind}.{name}");
    if kind == "aws_s3_bucket" {
        let bucket = format!("bucket@{address}");
        if let Some(Ok(Value::String(n))) = attr(b.body(), "bucket").map(|e| e.evaluate(ctx)) {
            tree.bucket_names
                .insert(format!("bucket:{n}"), bucket.clone());
        }
        for (arg, document) in INLINE_DOCUMENTS {
            let inline =
                attr(b.body(), arg).is_some() || b.body().blocks().any(|x| x.identifier() == arg);
            if inline {
                tree.owners.push(Owner {
                    address: format!("{address} (inline {arg})"),
                    document: document.to_owned(),
                    bucket: bucket.clone(),
                    rules: Vec::new(),
                    status: None,
                });
            }
        }
        return;
    }
    if !WHOLE_DOCUMENT_TYPES.contains(&kind) {
        return;
    }
    let bucket = match attr(b.body(), "bucket").map(|e| e.evaluate(ctx)) {
        Some(Ok(Value::String(s))) if s.starts_with("bucket") => s,
        Some(Ok(Value::String(s))) => format!("bucket:{s}"),
        other => {
            let why = match other {
                None => "no bucket argument".to_owned(),
                Some(Err(e)) => e.to_string(),
                Some(Ok(v)) => format!("{v} is not a bucket name"),
            };
            unresolved(
                tree,
                format!("{address}: cannot tell which bucket it writes: {why}"),
            );
            return;
        }
    };
    let mut owner = Owner {
        address: address.clone(),
        document: kind.to_owned(),
        bucket,
        rules: Vec::new(),
        status: None,
    };
    if kind == "aws_s3_bucket_versioning" {
        owner.status = b
            .body()
            .blocks()
            .find(|x| x.identifier() == "versioning_configuration")
            .and_then(|x| attr(x.body(), "status"))
            .and_then(|e| e.evaluate(ctx).ok())
            .and_then(|v| v.as_str().map(str::to_owned));
    }
    if kind == "aws_s3_bucket_lifecycle_configuration" {
        match lifecycle_rules(b.body(), ctx) {
            Ok(rules) => owner.rules = rules,
            Err(e) => unresolved(tree, format!("{address}: {e}")),
        }
    }
    tree.owners.push(owner);
}

/// Literal `rule` blocks, or a `dynamic "rule"` whose `for_each` is rules data in the shape of
/// infra/lifecycle-rules.json.
fn lifecycle_rules(body: &Body, ctx: &Context) -> Result<Vec<Rule>, String> {
    let mut rules = Vec::new();
    for b in body.blocks() {
        match (b.identifier(), label(b, 0)) {
            ("rule", _) => rules.push(literal_rule(b.body(), ctx)?),
            ("dynamic", "rule") => {
                let data = attr(b.body(), "for_each")
                    .ok_or("dynamic rule without for_each")?
                    .evaluate(ctx)
                    .map_err(|e| format!("dynamic rule for_each: {e}"))?;
                let json = serde_json::to_value(&data).map_err(|e| e.to_string())?;
                let list: Vec<Rule> = serde_json::from_value(json).map_err(|e| {
                    format!("dynamic rule data is not in the rules-file shape: {e}")
                })?;
                rules.extend(list);
            }
            _ => {}
        }
    }
    Ok(rules)
}

fn literal_rule(body: &Body, ctx: &Context) -> Result<Rule, String> {
    let string = |b: &Body, k: &str| -> Result<Option<String>, String> {
        match attr(b, k).map(|e| e.evaluate(ctx)) {
            None => Ok(None),
            Some(Ok(v)) => Ok(v.as_str().map(str::to_owned)),
            Some(Err(e)) => Err(format!("{k}: {e}")),
        }
    };
    let number = |b: &Body, k: &str| -> Result<Option<u32>, String> {
        match attr(b, k).map(|e| e.evaluate(ctx)) {
            None => Ok(None),
            Some(Ok(v)) => Ok(v.as_u64().and_then(|n| u32::try_from(n).ok())),
            Some(Err(e)) => Err(format!("{k}: {e}")),
        }
    };
    let block = |k: &str| body.blocks().find(|b| b.identifier() == k).map(Block::body);
    let mut rule = Rule::new(&string(body, "id")?.unwrap_or_default(), "");
    rule.enabled = string(body, "status")?.as_deref() != Some("Disabled");
    if let Some(f) = block("filter") {
        let and = f
            .blocks()
            .find(|b| b.identifier() == "and")
            .map(Block::body);
        rule.prefix = match and {
            Some(a) => string(a, "prefix")?,
            None => string(f, "prefix")?,
        }
        .unwrap_or_default();
        let sized = |b: &Body| {
            attr(b, "object_size_greater_than").is_some()
                || attr(b, "object_size_less_than").is_some()
        };
        rule.narrowed = f.blocks().any(|b| b.identifier() == "tag")
            || sized(f)
            || and.is_some_and(|a| attr(a, "tags").is_some() || sized(a));
    }
    if let Some(e) = block("expiration") {
        rule.expiration_days = number(e, "days")?;
        rule.expiration_date = string(e, "date")?;
        rule.expired_object_delete_marker = attr(e, "expired_object_delete_marker")
            .and_then(|x| x.evaluate(ctx).ok())
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
    }
    if let Some(n) = block("noncurrent_version_expiration") {
        rule.noncurrent_expiration_days = number(n, "noncurrent_days")?;
    }
    if let Some(a) = block("abort_incomplete_multipart_upload") {
        rule.abort_incomplete_multipart_days = number(a, "days_after_initiation")?;
    }
    Ok(rule)
}
