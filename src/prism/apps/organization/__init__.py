"""organization: who belongs to the organization, and what each role may do."""
