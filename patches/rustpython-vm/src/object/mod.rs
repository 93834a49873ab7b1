mod core;
mod ext;
mod payload;
pub(crate) mod qsbr;
mod traverse;
mod traverse_object;

pub use self::core::*;
pub use self::ext::*;
pub use self::payload::*;
pub use core::SIZEOF_PYOBJECT_HEAD;
pub(crate) use core::{GC_NO_OWNER, GC_PERMANENT, GC_REACHABLE, GC_UNTRACKED, GcLink, GcOwner};
pub use traverse::{MaybeTraverse, Traverse, TraverseFn};
