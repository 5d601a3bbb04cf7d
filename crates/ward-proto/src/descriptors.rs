//! An index of the compiled proto descriptors: messages, fields, enums and
//! RPCs by full name. The REST transcoder reads it to turn query strings and
//! path variables into request messages, and the OpenAPI document is
//! generated from it, so neither keeps a second copy of the protos' shapes.

use std::collections::HashMap;
use std::sync::OnceLock;

use prost::Message as _;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FileDescriptorSet, SourceCodeInfo};

/// A scalar or reference type of a field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    Bool,
    String,
    Bytes,
    /// int32, sint32, sfixed32, uint32, fixed32.
    Int32,
    /// int64, sint64, sfixed64, uint64, fixed64 (strings in proto3 JSON).
    Int64,
    Float,
    Double,
    /// A message, by full name without the leading dot.
    Message(String),
    /// An enum, by full name without the leading dot.
    Enum(String),
}

#[derive(Clone, Debug)]
pub struct Field {
    pub name: String,
    pub json_name: String,
    pub number: i32,
    pub kind: Kind,
    pub repeated: bool,
    /// Declared `optional` (proto3 presence).
    pub optional: bool,
    /// The real oneof this field belongs to, if any.
    pub oneof: Option<String>,
    pub comment: String,
    /// The field's `(ward.schema)` annotation.
    pub schema: Option<FieldSchema>,
}

/// `ward.FieldSchema` (proto/ward/schema.proto), decoded by hand: prost's
/// descriptor types drop extensions, so the options are read again with
/// these partial messages, which keep only the paths to field options.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct FieldSchema {
    #[prost(bool, tag = "1")]
    pub required: bool,
    #[prost(bool, tag = "2")]
    pub output_only: bool,
    #[prost(bool, tag = "3")]
    pub uidp: bool,
    #[prost(bool, tag = "4")]
    pub uidp_or_empty: bool,
    #[prost(string, tag = "5")]
    pub pattern: String,
    #[prost(uint32, tag = "6")]
    pub min_length: u32,
    #[prost(uint32, tag = "7")]
    pub max_length: u32,
    #[prost(uint32, tag = "8")]
    pub max_items: u32,
    #[prost(int64, optional, tag = "9")]
    pub minimum: Option<i64>,
    #[prost(int64, optional, tag = "10")]
    pub maximum: Option<i64>,
    #[prost(string, tag = "11")]
    pub format: String,
    #[prost(uint32, tag = "12")]
    pub min_items: u32,
    #[prost(bool, tag = "13")]
    pub kept_on_replace: bool,
}

mod partial {
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Set {
        #[prost(message, repeated, tag = "1")]
        pub file: Vec<File>,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct File {
        #[prost(string, tag = "2")]
        pub package: String,
        #[prost(message, repeated, tag = "4")]
        pub message_type: Vec<Message>,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Message {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, repeated, tag = "2")]
        pub field: Vec<Field>,
        #[prost(message, repeated, tag = "3")]
        pub nested_type: Vec<Message>,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Field {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "8")]
        pub options: Option<Options>,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Options {
        #[prost(message, optional, tag = "50101")]
        pub schema: Option<super::FieldSchema>,
    }
}

/// `(message, field) → schema` for every annotated field.
fn field_schemas(bytes: &[u8]) -> HashMap<(String, String), FieldSchema> {
    fn walk(scope: &str, m: &partial::Message, out: &mut HashMap<(String, String), FieldSchema>) {
        let name = format!("{scope}.{}", m.name);
        for f in &m.field {
            if let Some(s) = f.options.as_ref().and_then(|o| o.schema.clone()) {
                out.insert((name.clone(), f.name.clone()), s);
            }
        }
        for n in &m.nested_type {
            walk(&name, n, out);
        }
    }
    let mut out = HashMap::new();
    if let Ok(set) = <partial::Set as prost::Message>::decode(bytes) {
        for file in &set.file {
            for m in &file.message_type {
                walk(&file.package, m, &mut out);
            }
        }
    }
    out
}

#[derive(Clone, Debug)]
pub struct MessageDesc {
    pub name: String,
    pub fields: Vec<Field>,
    /// A synthesized `map<K, V>` entry (fields `key` and `value`).
    pub map_entry: bool,
    pub comment: String,
}

impl MessageDesc {
    /// The field called `name` (proto or JSON name).
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name || f.json_name == name)
    }
}

#[derive(Clone, Debug)]
pub struct EnumDesc {
    pub name: String,
    pub values: Vec<(String, i32)>,
}

#[derive(Clone, Debug)]
pub struct Method {
    pub input: String,
    pub output: String,
    pub comment: String,
}

/// Every message, enum and RPC of [`crate::FILE_DESCRIPTOR_SET`].
#[derive(Debug, Default)]
pub struct Pool {
    pub messages: HashMap<String, MessageDesc>,
    pub enums: HashMap<String, EnumDesc>,
    /// By `package.Service.Method`.
    pub methods: HashMap<String, Method>,
}

/// The pool, built once.
pub fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool::from_set(crate::FILE_DESCRIPTOR_SET))
}

fn strip(name: &str) -> String {
    name.trim_start_matches('.').to_owned()
}

/// Leading comments by source path.
struct Comments(HashMap<Vec<i32>, String>);

impl Comments {
    fn new(info: Option<&SourceCodeInfo>) -> Self {
        let mut map = HashMap::new();
        for loc in info.map(|i| i.location.as_slice()).unwrap_or_default() {
            if let Some(c) = &loc.leading_comments {
                let text = c.lines().map(str::trim).collect::<Vec<_>>().join(" ");
                map.insert(loc.path.clone(), text.trim().to_owned());
            }
        }
        Comments(map)
    }

    fn at(&self, path: &[i32]) -> String {
        self.0.get(path).cloned().unwrap_or_default()
    }
}

impl Pool {
    /// Indexes an encoded `FileDescriptorSet`; an undecodable set (which the
    /// build would not produce) gives an empty pool.
    pub fn from_set(bytes: &[u8]) -> Pool {
        let mut pool = Pool::default();
        let Ok(set) = FileDescriptorSet::decode(bytes) else {
            return pool;
        };
        let schemas = field_schemas(bytes);
        for file in &set.file {
            let package = file.package();
            let comments = Comments::new(file.source_code_info.as_ref());
            for (i, m) in file.message_type.iter().enumerate() {
                pool.add_message(package, m, &comments, &schemas, vec![4, i as i32]);
            }
            for e in &file.enum_type {
                pool.add_enum(package, e);
            }
            for (s, svc) in file.service.iter().enumerate() {
                for (k, m) in svc.method.iter().enumerate() {
                    pool.methods.insert(
                        format!("{package}.{}.{}", svc.name(), m.name()),
                        Method {
                            input: strip(m.input_type()),
                            output: strip(m.output_type()),
                            comment: comments.at(&[6, s as i32, 2, k as i32]),
                        },
                    );
                }
            }
        }
        pool
    }

    fn add_enum(&mut self, scope: &str, e: &prost_types::EnumDescriptorProto) {
        let name = format!("{scope}.{}", e.name());
        let values = e.value.iter().map(|v| (v.name().to_owned(), v.number())).collect();
        self.enums.insert(name.clone(), EnumDesc { name, values });
    }

    fn add_message(
        &mut self,
        scope: &str,
        m: &DescriptorProto,
        comments: &Comments,
        schemas: &HashMap<(String, String), FieldSchema>,
        path: Vec<i32>,
    ) {
        let name = format!("{scope}.{}", m.name());
        for (i, nested) in m.nested_type.iter().enumerate() {
            let mut p = path.clone();
            p.extend([3, i as i32]);
            self.add_message(&name, nested, comments, schemas, p);
        }
        for e in &m.enum_type {
            self.add_enum(&name, e);
        }
        let fields = m
            .field
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let kind = match f.r#type() {
                    Type::Bool => Kind::Bool,
                    Type::String => Kind::String,
                    Type::Bytes => Kind::Bytes,
                    Type::Int32 | Type::Sint32 | Type::Sfixed32 | Type::Uint32 | Type::Fixed32 => Kind::Int32,
                    Type::Int64 | Type::Sint64 | Type::Sfixed64 | Type::Uint64 | Type::Fixed64 => Kind::Int64,
                    Type::Float => Kind::Float,
                    Type::Double => Kind::Double,
                    Type::Enum => Kind::Enum(strip(f.type_name())),
                    Type::Message | Type::Group => Kind::Message(strip(f.type_name())),
                };
                let optional = f.proto3_optional();
                let oneof = f
                    .oneof_index
                    .filter(|_| !optional)
                    .and_then(|i| m.oneof_decl.get(i as usize))
                    .map(|o| o.name().to_owned());
                let mut p = path.clone();
                p.extend([2, i as i32]);
                Field {
                    name: f.name().to_owned(),
                    json_name: f.json_name().to_owned(),
                    number: f.number(),
                    kind,
                    repeated: f.label() == Label::Repeated,
                    optional,
                    oneof,
                    comment: comments.at(&p),
                    schema: schemas.get(&(name.clone(), f.name().to_owned())).cloned(),
                }
            })
            .collect();
        let map_entry = m.options.as_ref().is_some_and(|o| o.map_entry());
        self.messages.insert(
            name.clone(),
            MessageDesc {
                name,
                fields,
                map_entry,
                comment: comments.at(&path),
            },
        );
    }

    pub fn message(&self, name: &str) -> Option<&MessageDesc> {
        self.messages.get(name)
    }

    /// The `map<K, V>` entry type of `field`, if it is a map.
    pub fn map_entry(&self, field: &Field) -> Option<&MessageDesc> {
        match &field.kind {
            Kind::Message(m) if field.repeated => self.message(m).filter(|d| d.map_entry),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_messages_enums_and_methods() {
        let p = pool();
        let g = p.message("chainguard.platform.iam.v2.Group").expect("Group");
        assert_eq!(g.field("uid").map(|f| f.kind.clone()), Some(Kind::String));
        let create = &p.methods["chainguard.platform.iam.v2.GroupsService.CreateGroup"];
        assert_eq!(create.input, "chainguard.platform.iam.v2.CreateGroupRequest");
        assert!(p.enums.contains_key("chainguard.capabilities.Capability"));
        let list = p.message("chainguard.platform.iam.v2.ListGroupsRequest").expect("list");
        let uidp = list.field("uidp").expect("uidp");
        assert_eq!(uidp.kind, Kind::Message("chainguard.platform.common.UIDPFilter".into()));
        assert_eq!(list.field("pageSize").map(|f| f.name.as_str()), Some("page_size"));
    }
}
