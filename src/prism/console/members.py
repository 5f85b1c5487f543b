"""Members and roles (/console/members/): who belongs to the organization, and what each role may do.

Both lists are dispatched calls (config_manage/organization/member|role/list); read only: memberships are
changed with `prism user` on the command line. A role holding only one of the two permissions
(`organization.view_member`, `organization.view_role`) sees that list.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from prism.console.caller import ConsoleCaller
from prism.console.pages import page, signed_in

PATH = "/console/members/"
MEMBERS = "config_manage/organization/member"
ROLES = "config_manage/organization/role"


@signed_in
async def overview(request: Request, caller: ConsoleCaller) -> Response:
    # A list the role may not read shows that it may not (None), and the other list is still shown, as on the
    # governance page: the section is in the navigation of a role holding either permission.
    members = await caller.call(request, f"{MEMBERS}/list", {"page_size": 100}) \
        if caller.may(f"{MEMBERS}/list", request) else None
    roles = (await caller.call(request, f"{ROLES}/list", {"page_size": 100}))["items"] \
        if caller.may(f"{ROLES}/list", request) else None
    return page("console_members.html", request, caller, PATH, members=members, roles=roles)
