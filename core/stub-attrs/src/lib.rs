//! `#[stub]` on a `#[pyfunction]`, `#[pymethods]` block or `#[pyclass]` of dumpfilter._core: with
//! feature `stubs` (`make stubs`), the item handed to pyo3-stub-gen's attribute, its byte-slice
//! parameters typed as the bytes PyO3 takes and a field's `#[gen_stub(override_type(..))]` (which
//! pyo3-stub-gen reads on parameters only) made its getter's type; without it, the item as it
//! is, its `#[gen_stub(..)]` dropped. The core's build (`make setup`) so never compiles
//! pyo3-stub-gen.

use proc_macro::TokenStream;
use quote::{quote, ToTokens};
use syn::visit_mut::VisitMut;
use syn::{parse_macro_input, Attribute, FnArg, Item};

#[proc_macro_attribute]
pub fn stub(_args: TokenStream, item: TokenStream) -> TokenStream {
    let mut item = parse_macro_input!(item as Item);
    if !cfg!(feature = "stubs") {
        Strip.visit_item_mut(&mut item);
        return item.into_token_stream().into();
    }
    Bytes.visit_item_mut(&mut item);
    let (generator, getters) = match &mut item {
        Item::Fn(_) => (
            quote!(::pyo3_stub_gen::derive::gen_stub_pyfunction),
            quote!(),
        ),
        Item::Impl(_) => (
            quote!(::pyo3_stub_gen::derive::gen_stub_pymethods),
            quote!(),
        ),
        Item::Struct(s) => (
            quote!(::pyo3_stub_gen::derive::gen_stub_pyclass),
            field_types(s),
        ),
        _ => panic!("#[stub] is for a pyfunction, a pymethods block or a pyclass"),
    };
    quote!(#[#generator] #item #getters).into()
}

/// The getters of `s`'s fields typed by `#[gen_stub(override_type(type_repr = ".."))]` (taken off
/// the fields), submitted as its methods' getters, which take the place of the fields' own.
fn field_types(s: &mut syn::ItemStruct) -> proc_macro2::TokenStream {
    let mut getters = Vec::new();
    for field in s.fields.iter_mut() {
        let Some(at) = field.attrs.iter().position(is_override) else {
            continue;
        };
        let repr = type_repr(&field.attrs.remove(at));
        let name = field.ident.as_ref().expect("a named field").to_string();
        let doc: Vec<String> = field.attrs.iter().filter_map(doc_line).collect();
        let doc = doc.join("\n");
        getters.push(quote! {
            ::pyo3_stub_gen::type_info::MemberInfo {
                name: #name,
                r#type: || ::pyo3_stub_gen::TypeInfo::unqualified(#repr),
                doc: #doc,
                default: None,
                deprecated: None,
            }
        });
    }
    if getters.is_empty() {
        return quote!();
    }
    let ty = &s.ident;
    quote! {
        ::pyo3_stub_gen::inventory::submit! {
            ::pyo3_stub_gen::type_info::PyMethodsInfo {
                struct_id: ::std::any::TypeId::of::<#ty>,
                attrs: &[],
                getters: &[#(#getters),*],
                setters: &[],
                methods: &[],
                file: file!(),
                line: line!(),
                column: column!(),
            }
        }
    }
}

/// The string after `type_repr =` in an override.
fn type_repr(attr: &Attribute) -> String {
    let tokens = attr.meta.to_token_stream().to_string();
    let start = tokens
        .find("type_repr")
        .expect("override_type(type_repr = ..)");
    let rest = &tokens[start..];
    let open = rest.find('"').expect("a string") + 1;
    let close = open + rest[open..].find('"').expect("a closed string");
    rest[open..close].to_string()
}

/// A `///` line's text.
fn doc_line(attr: &Attribute) -> Option<String> {
    let syn::Meta::NameValue(nv) = &attr.meta else {
        return None;
    };
    if !nv.path.is_ident("doc") {
        return None;
    }
    let syn::Expr::Lit(syn::ExprLit {
        lit: syn::Lit::Str(s),
        ..
    }) = &nv.value
    else {
        return None;
    };
    Some(s.value())
}

fn is_override(attr: &Attribute) -> bool {
    attr.path().is_ident("gen_stub")
}

/// Drops every `#[gen_stub(..)]`.
struct Strip;

impl VisitMut for Strip {
    fn visit_attributes_mut(&mut self, attrs: &mut Vec<Attribute>) {
        attrs.retain(|a| !is_override(a));
    }
}

/// Types a parameter pyo3-stub-gen has no stub type for (a byte slice) as what PyO3 takes, and
/// an object parameter as a buffer (the only objects the core reads).
struct Bytes;

impl VisitMut for Bytes {
    fn visit_fn_arg_mut(&mut self, arg: &mut FnArg) {
        let FnArg::Typed(arg) = arg else { return };
        if arg.attrs.iter().any(is_override) {
            return;
        }
        let ty = arg.ty.to_token_stream().to_string().replace(' ', "");
        let ty = ty.replace("'_,", "").replace("'py,", "");
        let python = match ty.as_str() {
            "Bound<PyAny>" | "&Bound<PyAny>" => "typing_extensions.Buffer",
            "&[u8]" | "Vec<u8>" => "bytes",
            "Option<&[u8]>" | "Option<Vec<u8>>" => "bytes | None",
            "Vec<Vec<u8>>" => "list[bytes]",
            "Option<Vec<Vec<u8>>>" => "list[bytes] | None",
            _ => return,
        };
        arg.attrs
            .push(syn::parse_quote!(#[gen_stub(override_type(type_repr = #python, imports = ("typing_extensions")))]));
    }
}
