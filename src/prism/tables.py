"""Every table, imported once so that `Base.metadata` is complete (migrations, tests)."""

import prism.apps.finance.models
import prism.apps.spare_parts.models
import prism.models  # noqa: F401
from prism.models.base import Base

metadata = Base.metadata
