//! Flag sets stored as a u32: bits 0..16 are must-understand (a reader refuses unknown
//! ones), bits 16..32 may be ignored by a reader that does not know them.

/// The must-understand half of every flags field.
pub(crate) const INCOMPAT_MASK: u32 = 0x0000_FFFF;

/// Defines a flag set type over a `u32`.
macro_rules! flag_set {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* const $flag:ident = $value:expr; )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name(u32);

        impl $name {
            $( $(#[$fmeta])* pub const $flag: Self = Self($value); )*

            /// Every flag this format version defines.
            pub const KNOWN: Self = Self(0 $(| $value)*);

            /// No flag set.
            pub const fn empty() -> Self {
                Self(0)
            }

            /// The flags with these bits, unknown ones kept.
            pub const fn from_bits_retain(bits: u32) -> Self {
                Self(bits)
            }

            /// The raw bits.
            pub const fn bits(self) -> u32 {
                self.0
            }

            /// Whether every flag of `other` is set in `self`.
            pub const fn contains(self, other: Self) -> bool {
                self.0 & other.0 == other.0
            }

            /// Whether no flag is set.
            pub const fn is_empty(self) -> bool {
                self.0 == 0
            }

            /// The flags of both.
            pub const fn union(self, other: Self) -> Self {
                Self(self.0 | other.0)
            }

            /// Sets the flags of `other`.
            pub fn insert(&mut self, other: Self) {
                self.0 |= other.0;
            }

            /// Clears the flags of `other`.
            pub fn remove(&mut self, other: Self) {
                self.0 &= !other.0;
            }

            /// Must-understand bits (0..16) that this format version does not define.
            pub const fn unknown_incompat_bits(self) -> u32 {
                self.0 & $crate::layout::flags::INCOMPAT_MASK & !Self::KNOWN.0
            }
        }

        impl ::std::ops::BitOr for $name {
            type Output = Self;
            fn bitor(self, rhs: Self) -> Self {
                self.union(rhs)
            }
        }

        impl ::std::ops::BitOrAssign for $name {
            fn bitor_assign(&mut self, rhs: Self) {
                self.insert(rhs);
            }
        }

        impl ::std::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                write!(f, "{}(", stringify!($name))?;
                let mut rest = self.0;
                let mut first = true;
                $(
                    if self.contains(Self::$flag) && $value != 0 {
                        if !first {
                            f.write_str(" | ")?;
                        }
                        f.write_str(stringify!($flag))?;
                        first = false;
                        rest &= !$value;
                    }
                )*
                if rest != 0 || first {
                    if !first {
                        f.write_str(" | ")?;
                    }
                    write!(f, "{rest:#x}")?;
                }
                f.write_str(")")
            }
        }
    };
}

pub(crate) use flag_set;
