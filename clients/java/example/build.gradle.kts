// A project that tests with Larder, with Gradle: add the dependency, run `gradle test`. The extension
// starts the server that larder-client carries (linux-x86_64; elsewhere `larder` on PATH) with
// `larder up`, shared by the test workers of the run; it stops a second after the last one ends.
// Its templates are fixtures/ (here a link to the repository's). pom.xml beside this is the same with Maven.
plugins {
    java
}

repositories {
    mavenCentral()
}

tasks.withType<JavaCompile> {
    options.release.set(17)
}

dependencies {
    testImplementation("dev.larder:larder-client:0.1.0")
    testImplementation(platform("org.junit:junit-bom:5.10.2"))
    testImplementation("org.junit.jupiter:junit-jupiter")
    testRuntimeOnly("org.junit.platform:junit-platform-launcher")
}

tasks.test {
    useJUnitPlatform()
    // Optional: the server's settings, as system properties or the variables LARDER_URL, LARDER_BINARY,
    // LARDER_FIXTURES (a server of your own: LARDER_URL, and nothing is started).
    // systemProperty("larder.fixtures", file("src/test/fixtures").path)
    testLogging {
        events("failed")
        showStandardStreams = false
    }
}
