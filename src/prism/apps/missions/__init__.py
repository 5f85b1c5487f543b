"""missions: plan, start and close missions with budgets (mission_control)."""
