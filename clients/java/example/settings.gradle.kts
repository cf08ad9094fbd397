rootProject.name = "gallery"
