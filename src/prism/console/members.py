"""Members and roles (/console/members/): who belongs to the organization, and what each role may do.

Both lists are dispatched calls (config_manage/organization/member|role/list); read only: memberships are
changed with `prism user` on the command line.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from prism.console.caller import ConsoleCaller
from prism.console.pages import page, signed_in

PATH = "/console/members/"


@signed_in
async def overview(request: Request, caller: ConsoleCaller) -> Response:
    members = await caller.call(request, "config_manage/organization/member/list", {"page_size": 100})
    roles = await caller.call(request, "config_manage/organization/role/list", {"page_size": 100})
    return page("console_members.html", request, caller, PATH, members=members, roles=roles["items"])
