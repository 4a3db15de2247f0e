//! `#[stub]` on a `#[pyfunction]`, `#[pymethods]` block or `#[pyclass]` of dumpfilter._core: with
//! feature `stubs` (`make stubs`), the item handed to pyo3-stub-gen's attribute, its byte-slice
//! parameters typed as the bytes PyO3 takes; without it, the item as it is, its `#[gen_stub(..)]`
//! dropped. The core's build (`make setup`) so never compiles pyo3-stub-gen.

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
    let generator = match &item {
        Item::Fn(_) => quote!(::pyo3_stub_gen::derive::gen_stub_pyfunction),
        Item::Impl(_) => quote!(::pyo3_stub_gen::derive::gen_stub_pymethods),
        Item::Struct(_) => quote!(::pyo3_stub_gen::derive::gen_stub_pyclass),
        _ => panic!("#[stub] is for a pyfunction, a pymethods block or a pyclass"),
    };
    quote!(#[#generator] #item).into()
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
            // (the one dict the core takes: AssembleConfig's replicate-rewrite-db names)
            "Option<Py<PyDict>>" => "dict[bytes, bytes] | None",
            _ => return,
        };
        arg.attrs
            .push(syn::parse_quote!(#[gen_stub(override_type(type_repr = #python, imports = ("typing_extensions")))]));
    }
}
