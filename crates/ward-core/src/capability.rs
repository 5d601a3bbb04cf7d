//! Capabilities (reference §5.4) and the built-in roles (§5.3).
//!
//! Only the capabilities Ward implements are listed, with the reference's enum
//! numbers and names so that roles and tokens stay compatible with existing
//! clients. Built-in roles are the reference's bundles restricted to these; they
//! grow as Ward implements more.

use sha2::{Digest, Sha256};

macro_rules! capabilities {
    ($($variant:ident = $num:literal, $enum_name:literal, $dotted:literal;)*) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Capability {
            $($variant = $num,)*
        }

        impl Capability {
            pub const ALL: &'static [Capability] = &[$(Capability::$variant,)*];

            /// The enum value name used in v2 JSON (`CAP_IAM_GROUPS_LIST`).
            pub fn enum_name(self) -> &'static str {
                match self { $(Capability::$variant => $enum_name,)* }
            }

            /// The dotted name used by v1 and tooling (`groups.list`).
            pub fn dotted_name(self) -> &'static str {
                match self { $(Capability::$variant => $dotted,)* }
            }
        }
    };
}

capabilities! {
    IamGroupsCreate = 101, "CAP_IAM_GROUPS_CREATE", "groups.create";
    IamGroupsUpdate = 102, "CAP_IAM_GROUPS_UPDATE", "groups.update";
    IamGroupsList = 103, "CAP_IAM_GROUPS_LIST", "groups.list";
    IamGroupsDelete = 104, "CAP_IAM_GROUPS_DELETE", "groups.delete";
    IamRolesCreate = 301, "CAP_IAM_ROLES_CREATE", "roles.create";
    IamRolesUpdate = 302, "CAP_IAM_ROLES_UPDATE", "roles.update";
    IamRolesList = 303, "CAP_IAM_ROLES_LIST", "roles.list";
    IamRolesDelete = 304, "CAP_IAM_ROLES_DELETE", "roles.delete";
    IamRoleBindingsCreate = 401, "CAP_IAM_ROLE_BINDINGS_CREATE", "role_bindings.create";
    IamRoleBindingsUpdate = 402, "CAP_IAM_ROLE_BINDINGS_UPDATE", "role_bindings.update";
    IamRoleBindingsList = 403, "CAP_IAM_ROLE_BINDINGS_LIST", "role_bindings.list";
    IamRoleBindingsDelete = 404, "CAP_IAM_ROLE_BINDINGS_DELETE", "role_bindings.delete";
    IamIdentityCreate = 901, "CAP_IAM_IDENTITY_CREATE", "identity.create";
    IamIdentityUpdate = 902, "CAP_IAM_IDENTITY_UPDATE", "identity.update";
    IamIdentityList = 903, "CAP_IAM_IDENTITY_LIST", "identity.list";
    IamIdentityDelete = 904, "CAP_IAM_IDENTITY_DELETE", "identity.delete";
}

impl Capability {
    /// The capability with this enum number, if Ward implements it.
    pub fn from_number(n: i32) -> Option<Self> {
        Self::ALL.iter().copied().find(|c| *c as i32 == n)
    }

    /// By enum name or dotted name.
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|c| c.enum_name() == s || c.dotted_name() == s)
    }

    fn bit(self) -> u32 {
        Self::ALL.iter().position(|c| *c == self).expect("listed") as u32
    }
}

/// A set of capabilities (a bitmask over [`Capability::ALL`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CapSet(u64);

impl CapSet {
    pub const EMPTY: CapSet = CapSet(0);

    pub fn all() -> Self {
        Capability::ALL.iter().copied().collect()
    }

    pub fn contains(self, c: Capability) -> bool {
        self.0 & (1 << c.bit()) != 0
    }

    pub fn insert(&mut self, c: Capability) {
        self.0 |= 1 << c.bit();
    }

    pub fn union(self, other: CapSet) -> CapSet {
        CapSet(self.0 | other.0)
    }

    pub fn intersection(self, other: CapSet) -> CapSet {
        CapSet(self.0 & other.0)
    }

    pub fn is_subset(self, other: CapSet) -> bool {
        self.0 & !other.0 == 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Members in enum-number order.
    pub fn iter(self) -> impl Iterator<Item = Capability> {
        Capability::ALL.iter().copied().filter(move |c| self.contains(*c))
    }

    /// Comma-separated enum numbers: the storage form.
    pub fn to_storage(self) -> String {
        self.iter()
            .map(|c| (c as i32).to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Parses the storage form; numbers Ward does not know are skipped.
    pub fn from_storage(s: &str) -> Self {
        s.split(',')
            .filter_map(|n| n.trim().parse().ok())
            .filter_map(Capability::from_number)
            .collect()
    }
}

impl FromIterator<Capability> for CapSet {
    fn from_iter<I: IntoIterator<Item = Capability>>(iter: I) -> Self {
        let mut s = CapSet::EMPTY;
        for c in iter {
            s.insert(c);
        }
        s
    }
}

/// A built-in role: root-level, the same uid on every installation.
pub struct BuiltinRole {
    pub name: &'static str,
    pub description: &'static str,
    pub capabilities: &'static [Capability],
}

impl BuiltinRole {
    /// A stable 40-hex uid derived from the name.
    pub fn uid(&self) -> String {
        hex::encode(&Sha256::digest(format!("ward built-in role {}", self.name))[..20])
    }

    pub fn caps(&self) -> CapSet {
        self.capabilities.iter().copied().collect()
    }
}

use Capability::*;

const VIEW: &[Capability] = &[IamGroupsList, IamIdentityList, IamRolesList, IamRoleBindingsList];

/// The built-in roles (reference §5.3 bundles, restricted to what Ward implements).
pub const BUILTIN_ROLES: &[BuiltinRole] = &[
    BuiltinRole {
        name: "owner",
        description: "Owner Role (built-in): full control of the group and everything below it",
        capabilities: &[
            IamGroupsCreate,
            IamGroupsUpdate,
            IamGroupsList,
            IamGroupsDelete,
            IamRolesCreate,
            IamRolesUpdate,
            IamRolesList,
            IamRolesDelete,
            IamRoleBindingsCreate,
            IamRoleBindingsUpdate,
            IamRoleBindingsList,
            IamRoleBindingsDelete,
            IamIdentityCreate,
            IamIdentityUpdate,
            IamIdentityList,
            IamIdentityDelete,
        ],
    },
    BuiltinRole {
        name: "editor",
        description: "Editor Role (built-in)",
        capabilities: VIEW,
    },
    BuiltinRole {
        name: "viewer",
        description: "Viewer Role (built-in)",
        capabilities: VIEW,
    },
    BuiltinRole {
        name: "registry.pull",
        description: "Registry Pull Role (built-in)",
        capabilities: &[IamGroupsList],
    },
    BuiltinRole {
        name: "registry.push",
        description: "Registry Push Role (built-in)",
        capabilities: &[IamGroupsList, IamGroupsCreate],
    },
    BuiltinRole {
        name: "registry.pull_token_creator",
        description: "Registry Pull Token Creator Role (built-in)",
        capabilities: &[IamRoleBindingsCreate, IamIdentityCreate, IamRolesList, IamGroupsList],
    },
];

pub fn builtin_role(name: &str) -> Option<&'static BuiltinRole> {
    BUILTIN_ROLES.iter().find(|r| r.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_and_names() {
        let s: CapSet = [IamGroupsList, IamRolesList].into_iter().collect();
        assert!(s.contains(IamGroupsList) && !s.contains(IamGroupsCreate));
        assert_eq!(CapSet::from_storage(&s.to_storage()), s);
        assert!(s.is_subset(CapSet::all()) && !CapSet::all().is_subset(s));
        assert_eq!(Capability::from_name("groups.list"), Some(IamGroupsList));
        assert_eq!(
            Capability::from_name("CAP_IAM_IDENTITY_DELETE"),
            Some(IamIdentityDelete)
        );
        assert_eq!(Capability::from_number(904), Some(IamIdentityDelete));
        assert_eq!(CapSet::from_storage("103,99999"), [IamGroupsList].into_iter().collect());
    }

    #[test]
    fn builtin_uids_are_stable_and_distinct() {
        let viewer = builtin_role("viewer").unwrap();
        assert_eq!(viewer.uid(), builtin_role("viewer").unwrap().uid());
        assert!(crate::uidp::Uidp::is_valid(&viewer.uid()));
        let mut uids: Vec<String> = BUILTIN_ROLES.iter().map(BuiltinRole::uid).collect();
        uids.sort();
        uids.dedup();
        assert_eq!(uids.len(), BUILTIN_ROLES.len());
        assert_eq!(builtin_role("owner").unwrap().caps(), CapSet::all());
    }
}
