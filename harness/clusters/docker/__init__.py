"""The Docker cluster: Compose projects, images, helper containers."""
