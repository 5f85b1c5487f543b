"""The vocabulary bridge of capability search: words people use for what handlers call otherwise.

Each group holds interchangeable words; a query word also looks for the rest of its group, at lower
weight (search.SYNONYM_WEIGHT). The groups are general business vocabulary — an agent asking to
"raise an incident" or "scrap a machine" should find `ticket/create` and `asset/retire` without
knowing Prism's names. A group may share words with another; a word then expands to both.

Extend it for a domain of your own by adding groups; keep them general (a group that only makes
one phrasing work helps nobody else). bench/search_eval.py measures the effect on held-out tasks.
"""

from __future__ import annotations

SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    # records and what is done to them
    ("delete", "remove", "destroy", "erase", "purge"),
    ("create", "add", "new", "register", "enter", "record", "raise", "open", "file", "log", "post", "book"),
    ("update", "change", "edit", "modify", "adjust", "set", "amend", "rename"),
    ("list", "browse", "enumerate", "show", "all"),
    ("read", "get", "fetch", "view", "detail", "lookup"),
    ("search", "find", "query", "lookup", "look"),
    ("count", "total", "number", "many", "tally"),
    ("report", "summary", "aggregate", "overview", "breakdown", "statistics", "stats", "rate"),
    ("approve", "accept", "authorize", "sign", "signoff", "allow", "okay"),
    ("deny", "refuse", "decline", "reject", "rejected"),
    ("appeal", "contest", "dispute", "challenge", "reconsider", "disagree"),
    ("submit", "send", "forward", "lodge", "transmit"),
    ("assign", "give", "allocate", "hand", "delegate", "route", "owner"),
    ("hold", "pause", "wait", "suspend", "postpone"),
    ("receive", "receipt", "arrived", "arrive", "arrival", "landed"),
    ("disable", "deactivate", "off"),
    ("cancel", "stop", "halt", "kill", "abandon", "scrap"),
    ("escalate", "urgent", "priority", "bump", "urgency"),
    ("resolve", "solve", "fixed", "note", "resolution"),
    ("archive", "shelve", "hide"),
    # money
    ("invoice", "bill", "billing"),
    ("vendor", "supplier", "seller", "provider", "creditor"),
    ("payable", "ap", "owe", "owed", "debt"),
    ("overdue", "late", "outstanding", "unpaid", "aging", "ageing", "longest", "oldest", "past"),
    ("cost", "spend", "spent", "expense", "price", "money"),
    ("payment", "pay", "paid", "settle", "remit"),
    ("budget", "spending", "cap", "ceiling", "limit"),
    # stock and upkeep
    ("stock", "inventory", "quantity", "storeroom", "warehouse", "supply"),
    ("low", "below", "reorder", "shortage", "short"),
    ("part", "component", "spare", "piece"),
    ("asset", "machine", "equipment", "device", "vehicle", "forklift", "compressor", "plant"),
    ("down", "broken", "broke", "outage", "unusable", "use"),
    ("operational", "working", "repaired", "running"),
    ("retire", "scrap", "decommission", "dispose", "permanently"),
    ("maintenance", "repair", "fix", "overhaul", "upkeep", "servicing"),
    ("work", "job", "task", "chore"),
    ("meter", "gauge", "counter", "reading", "odometer"),
    # service desk
    ("ticket", "incident", "issue", "case", "problem"),
    ("itsm", "helpdesk", "help", "desk", "support"),
    ("sla", "deadline", "overdue", "breach", "late", "due"),
    ("comment", "remark", "reply", "note"),
    ("template", "blueprint", "boilerplate"),
    # people and messages
    ("customer", "client"),
    ("member", "staff", "worker", "employee", "colleague", "team", "person", "user", "people", "everyone"),
    ("notify", "notification", "alert", "message", "email", "text", "tell", "inform", "broadcast"),
    ("inbox", "unread", "unseen", "seen"),
    ("role", "everyone", "approver", "every"),
    # insurance claims
    ("payer", "insurer", "insurance", "carrier"),
    ("claim", "reimbursement", "paperwork"),
    # documents and knowledge
    ("document", "file", "attachment", "handbook", "manual", "paper", "guide"),
    ("chunk", "passage", "excerpt", "section", "paragraph"),
    ("knowledge", "information", "answer", "know"),
    ("upload", "store", "import", "ingest", "save"),
    # agents, missions, governance
    ("agent", "bot", "assistant", "automation", "robot"),
    ("spawn", "launch", "start", "run", "kick"),
    ("fail", "crash", "crashed", "error", "abort"),
    ("performance", "success", "well", "doing", "effectiveness"),
    ("persona", "profile", "rule", "policy"),
    ("oversight", "human", "review", "risky", "pending", "escalated"),
    ("mission", "project", "campaign", "initiative", "objective"),
    ("decision", "verdict", "ruling"),
    ("violation", "infringement", "breach", "noncompliance", "contravention"),
    # integrations and the platform itself
    ("endpoint", "api", "server", "partner", "integration", "external", "https", "connector", "connection"),
    ("ping", "reachable", "alive", "health", "check"),
    ("call", "hit", "invoke", "invocation"),
    ("whoami", "identity", "who", "me"),
    ("webhook", "event", "subscription", "subscribe", "callback", "hook"),
    ("introspect", "discover", "explore", "capability"),
)
