//! The per-RPC authorization table (reference §3.6), as data.
//!
//! Every IAM RPC names the capability it requires and where that capability
//! must hold: at the parent group (creates), at the resource itself (get,
//! update, delete), or nowhere in particular (lists, which return only what the
//! caller may list). The service layer authorizes through these rules and the
//! authorization tests derive their expectations from them.

use crate::capability::Capability::{self, *};

/// The resource an RPC acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Group,
    Identity,
    Role,
    RoleBinding,
}

impl Kind {
    /// The resource type named in NOT_FOUND details.
    pub const fn type_name(self) -> &'static str {
        match self {
            Kind::Group => "iam.chainguard.dev/Group",
            Kind::Identity => "iam.chainguard.dev/Identity",
            Kind::Role => "iam.chainguard.dev/Role",
            Kind::RoleBinding => "iam.chainguard.dev/RoleBinding",
        }
    }

    /// The capability that makes a resource of this kind visible.
    pub const fn list_capability(self) -> Capability {
        match self {
            Kind::Group => IamGroupsList,
            Kind::Identity => IamIdentityList,
            Kind::Role => IamRolesList,
            Kind::RoleBinding => IamRoleBindingsList,
        }
    }
}

/// Where an RPC's capability must hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// At the parent group named in the request (creates).
    Parent,
    /// At the resource's own uid (get, update, delete).
    Resource,
    /// Nowhere in particular: results are filtered to where it holds (lists).
    Unscoped,
}

#[derive(Clone, Copy, Debug)]
pub struct Rule {
    /// `Service.Method`, as in the reference.
    pub rpc: &'static str,
    pub kind: Kind,
    pub capability: Capability,
    pub scope: Scope,
}

impl Rule {
    /// The capability that makes the thing at the rule's scope visible, and the
    /// type to name when it is not.
    pub const fn seen_with(&self) -> (Capability, &'static str) {
        match self.scope {
            Scope::Parent => (IamGroupsList, Kind::Group.type_name()),
            Scope::Resource | Scope::Unscoped => (self.kind.list_capability(), self.kind.type_name()),
        }
    }
}

macro_rules! rules {
    ($($name:ident = $rpc:literal, $kind:ident, $cap:ident, $scope:ident;)*) => {
        $(pub const $name: Rule = Rule { rpc: $rpc, kind: Kind::$kind, capability: $cap, scope: Scope::$scope };)*
        /// Every rule, in reference order.
        pub const RULES: &[Rule] = &[$($name,)*];
    };
}

rules! {
    CREATE_GROUP = "GroupsService.CreateGroup", Group, IamGroupsCreate, Parent;
    GET_GROUP = "GroupsService.GetGroup", Group, IamGroupsList, Resource;
    LIST_GROUPS = "GroupsService.ListGroups", Group, IamGroupsList, Unscoped;
    UPDATE_GROUP = "GroupsService.UpdateGroup", Group, IamGroupsUpdate, Resource;
    DELETE_GROUP = "GroupsService.DeleteGroup", Group, IamGroupsDelete, Resource;
    CREATE_IDENTITY = "IdentitiesService.CreateIdentity", Identity, IamIdentityCreate, Parent;
    GET_IDENTITY = "IdentitiesService.GetIdentity", Identity, IamIdentityList, Resource;
    LIST_IDENTITIES = "IdentitiesService.ListIdentities", Identity, IamIdentityList, Unscoped;
    UPDATE_IDENTITY = "IdentitiesService.UpdateIdentity", Identity, IamIdentityUpdate, Resource;
    DELETE_IDENTITY = "IdentitiesService.DeleteIdentity", Identity, IamIdentityDelete, Resource;
    CREATE_ROLE = "RolesService.CreateRole", Role, IamRolesCreate, Parent;
    GET_ROLE = "RolesService.GetRole", Role, IamRolesList, Resource;
    LIST_ROLES = "RolesService.ListRoles", Role, IamRolesList, Unscoped;
    UPDATE_ROLE = "RolesService.UpdateRole", Role, IamRolesUpdate, Resource;
    DELETE_ROLE = "RolesService.DeleteRole", Role, IamRolesDelete, Resource;
    CREATE_ROLE_BINDING = "RoleBindingsService.CreateRoleBinding", RoleBinding, IamRoleBindingsCreate, Parent;
    GET_ROLE_BINDING = "RoleBindingsService.GetRoleBinding", RoleBinding, IamRoleBindingsList, Resource;
    LIST_ROLE_BINDINGS = "RoleBindingsService.ListRoleBindings", RoleBinding, IamRoleBindingsList, Unscoped;
    UPDATE_ROLE_BINDING = "RoleBindingsService.UpdateRoleBinding", RoleBinding, IamRoleBindingsUpdate, Resource;
    DELETE_ROLE_BINDING = "RoleBindingsService.DeleteRoleBinding", RoleBinding, IamRoleBindingsDelete, Resource;
}
