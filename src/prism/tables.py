"""Every table, imported once so that `Base.metadata` is complete (migrations, tests)."""

import prism.apps.agents.models
import prism.apps.claims.models
import prism.apps.documents.models
import prism.apps.finance.models
import prism.apps.integrations.models
import prism.apps.itsm.models
import prism.apps.maintenance.models
import prism.apps.notifications.models
import prism.apps.spare_parts.models
import prism.governance.models
import prism.idempotency.models
import prism.integrations.models
import prism.mcp_server.models
import prism.models
import prism.oauth.models
import prism.webhooks.models  # noqa: F401
from prism.models.base import Base

metadata = Base.metadata
