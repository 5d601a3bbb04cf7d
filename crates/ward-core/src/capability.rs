//! Capabilities (reference §5.4), with their proto numbers and string names.
//!
//! Only the capabilities Ward implements are listed; numbers are the reference's
//! so that tokens and roles stay compatible with existing clients.

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    IamGroupsCreate = 101,
    IamGroupsUpdate = 102,
    IamGroupsList = 103,
    IamGroupsDelete = 104,
}

impl Capability {
    pub const ALL: &'static [Capability] = &[
        Capability::IamGroupsCreate,
        Capability::IamGroupsUpdate,
        Capability::IamGroupsList,
        Capability::IamGroupsDelete,
    ];

    /// The enum value name used in v2 JSON (`CAP_IAM_GROUPS_LIST`).
    pub fn enum_name(self) -> &'static str {
        match self {
            Capability::IamGroupsCreate => "CAP_IAM_GROUPS_CREATE",
            Capability::IamGroupsUpdate => "CAP_IAM_GROUPS_UPDATE",
            Capability::IamGroupsList => "CAP_IAM_GROUPS_LIST",
            Capability::IamGroupsDelete => "CAP_IAM_GROUPS_DELETE",
        }
    }

    /// The dotted name used by v1 and tooling (`groups.list`).
    pub fn dotted_name(self) -> &'static str {
        match self {
            Capability::IamGroupsCreate => "groups.create",
            Capability::IamGroupsUpdate => "groups.update",
            Capability::IamGroupsList => "groups.list",
            Capability::IamGroupsDelete => "groups.delete",
        }
    }
}
