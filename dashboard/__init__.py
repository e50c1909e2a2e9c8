"""The team dashboard: people see and govern what their agents remember (another thin door onto the services)."""
