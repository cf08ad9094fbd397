#!/usr/bin/env python3
"""The dashboard in a real browser: headless Chromium driven by Selenium,
against the real binary started with a token.

    scripts/browser-test .build/debug/larder          (makes Selenium's venv)
    python3 Tests/blackbox/test_dashboard.py .build/debug/larder

Sign-in over plain HTTP is checked first (standard library only). The
browser part needs Selenium and Chromium with its driver (apt: chromium,
chromium-driver; or $LARDER_CHROMIUM and $LARDER_CHROMEDRIVER); without
them it prints a notice and is skipped. Screenshots go to
$LARDER_SCREENSHOTS (default: a new temporary directory).
"""
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from processes import FIXTURES, Server, fresh_root, larder_binary  # noqa: E402

BINARY = larder_binary()
TOKEN = "browser-test token & +more=yes%"  # ASCII (it also goes in a header), with what a form must encode
CHROMIUM = os.environ.get("LARDER_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = os.environ.get("LARDER_CHROMEDRIVER") or shutil.which("chromedriver") or "/usr/bin/chromedriver"
PNG = b"\x89PNG\r\n\x1a\n"

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    SELENIUM = None
except ImportError as error:
    SELENIUM = str(error)


class Larder(Server):
    """The server as a subprocess on a free port, with a token; its log in a file."""

    def __init__(self, root):
        self.root = root
        super().__init__(BINARY, root, FIXTURES, "--token", TOKEN)
        # Browsers keep cookies per host, not port: the name carries the port.
        self.cookie_name = "larder_session_%d" % self.port

    def call(self, method, path, body=None, content_type="application/json", token=TOKEN, **options):
        """With the bearer token, unless token=None (**AS_BROWSER: as a page before sign-in sends it)."""
        return super().call(method, path, body, content_type, token=token, **options)

    def create(self, n, **fields):
        ids = []
        for i in range(n):
            status, store, _ = self.call("POST", "/stores", dict(fields, label=fields.get("label", "store") + "-%d" % i))
            assert status == 201, (status, store)
            ids.append(store["id"])
        return ids


def form(token):
    return urllib.parse.urlencode({"token": token}).encode()


FORM = "application/x-www-form-urlencoded"
# No token, and the answer's bytes (redirects are never followed).
AS_BROWSER = {"token": None, "raw": True}


class ServerCase(unittest.TestCase):
    """One server, with its token, for all the tests of a class."""

    @classmethod
    def setUpClass(cls):
        cls.root = fresh_root("larder-dashboard-")
        cls.larder = Larder(cls.root)

    @classmethod
    def tearDownClass(cls):
        cls.larder.stop()
        shutil.rmtree(cls.root, ignore_errors=True)


class SignInOverHTTPTests(ServerCase):
    """What the browser relies on, seen on the wire."""

    def test_the_dashboard_asks_for_the_token_and_other_routes_answer_json(self):
        status, body, headers = self.larder.call("GET", "/", **AS_BROWSER)
        self.assertEqual(status, 401)
        self.assertTrue(headers["content-type"].startswith("text/html"))
        self.assertIn(b'<form method="post" action="/sign-in">', body)
        self.assertIn(b'name="token"', body)
        self.assertIn("frame-ancestors 'none'", headers["content-security-policy"])
        status, body, headers = self.larder.call("GET", "/stores", **AS_BROWSER)
        self.assertEqual((status, json.loads(body)["error"]["code"]), (401, "unauthorized"))
        # A store's page is a page too: the form, not JSON, and nothing of the store.
        id = self.larder.create(1, label="secret")[0]
        status, body, headers = self.larder.call("GET", "/stores/%s/page" % id, **AS_BROWSER)
        self.assertEqual(status, 401)
        self.assertIn(b'name="token"', body)
        self.assertNotIn(id.encode(), body)

    def test_a_wrong_token_shows_the_form_again(self):
        status, body, headers = self.larder.call("POST", "/sign-in", form("guess"), FORM, **AS_BROWSER)
        self.assertEqual(status, 401)
        self.assertNotIn("set-cookie", headers)
        self.assertIn(b"not this server", body)

    def test_the_right_token_sets_a_cookie_that_is_not_the_token(self):
        status, _, headers = self.larder.call("POST", "/sign-in", form(TOKEN), FORM, **AS_BROWSER)
        self.assertEqual(status, 303)
        self.assertEqual(headers["location"], "/")
        cookie, *attributes = [part.strip() for part in headers["set-cookie"].split(";")]
        self.assertTrue(cookie.startswith(self.larder.cookie_name + "="), cookie)
        self.assertIn("HttpOnly", attributes)
        self.assertIn("SameSite=Strict", attributes)
        self.assertNotIn(urllib.parse.quote(TOKEN), cookie)
        self.assertNotIn("token", cookie)
        status, body, _ = self.larder.call("GET", "/stores", headers={"Cookie": cookie}, **AS_BROWSER)
        self.assertEqual(status, 200, body)
        status, body, _ = self.larder.call("GET", "/", headers={"Cookie": cookie}, **AS_BROWSER)
        self.assertEqual(status, 200)
        self.assertIn(b'<main id="live">', body)

    def test_bad_forms_get_the_contracts_errors(self):
        for body, content_type, code in [
            (b"", FORM, "bad_request"),
            (b"token=%zz", FORM, "bad_request"),
            (b"token=x&admin=1", FORM, "bad_request"),
            (json.dumps({"token": TOKEN}).encode(), "application/json", "unsupported_media_type"),
            (b"token=" + b"a" * 20000, FORM, "payload_too_large"),
        ]:
            status, answer, _ = self.larder.call("POST", "/sign-in", body, content_type, **AS_BROWSER)
            self.assertEqual(json.loads(answer)["error"]["code"], code, (body[:40], status))


@unittest.skipIf(SELENIUM is not None, "Selenium is not installed (%s); scripts/browser-test installs it" % SELENIUM)
@unittest.skipUnless(os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK),
                     "Chromium or chromedriver is not installed (apt-get install chromium chromium-driver)")
class BrowserTests(ServerCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.screenshots = os.environ.get("LARDER_SCREENSHOTS") or tempfile.mkdtemp(prefix="larder-screenshots-")
        os.makedirs(cls.screenshots, exist_ok=True)
        print("screenshots in %s" % cls.screenshots, file=sys.stderr)
        options = Options()
        options.binary_location = CHROMIUM
        # As root in a container Chromium's sandbox cannot start; /dev/shm is small there.
        for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,800"):
            options.add_argument(argument)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        cls.driver_log = tempfile.NamedTemporaryFile(prefix="chromedriver-", suffix=".txt", delete=False)
        cls.driver = webdriver.Chrome(service=Service(CHROMEDRIVER, log_output=cls.driver_log.name), options=options)
        cls.driver.set_page_load_timeout(30)

    @classmethod
    def tearDownClass(cls):
        cls.driver.quit()
        cls.driver_log.close()
        os.unlink(cls.driver_log.name)
        super().tearDownClass()

    def setUp(self):
        self.driver.delete_all_cookies()
        self.wait = WebDriverWait(self.driver, 30)
        self.made = []

    def tearDown(self):
        # Each test sees only its own stores.
        for id in self.made:
            self.larder.call("DELETE", "/stores/" + id)

    def create(self, n, **fields):
        ids = self.larder.create(n, **fields)
        self.made += ids
        return ids

    def shoot(self, name):
        path = os.path.join(self.screenshots, name + ".png")
        self.assertTrue(self.driver.save_screenshot(path))
        with open(path, "rb") as f:
            data = f.read()
        self.assertGreater(len(data), 1000, path)
        self.assertTrue(data.startswith(PNG), path)
        return path

    def sign_in(self):
        self.driver.get(self.larder.base + "/")
        field = self.wait.until(lambda d: d.find_element(By.NAME, "token"))
        field.send_keys(TOKEN)
        field.submit()
        self.wait.until(lambda d: d.find_elements(By.ID, "live"))

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def csp_violations(self):
        return [entry["message"] for entry in self.driver.get_log("browser") if "Content Security Policy" in entry["message"]]

    def test_sign_in_list_and_delete(self):
        ids = self.create(2, template="gallery", fixtures=["artists", "artworks"], label="gallery") + self.create(3, label="empty")

        self.driver.get(self.larder.base + "/")
        self.wait.until(lambda d: d.find_element(By.NAME, "token"))
        self.assertEqual(self.driver.find_element(By.NAME, "token").get_attribute("type"), "password")
        self.assertEqual(self.driver.find_element(By.TAG_NAME, "form").get_attribute("method"), "post")
        for id in ids:
            self.assertNotIn(id, self.driver.page_source)
        self.shoot("1-sign-in")

        field = self.driver.find_element(By.NAME, "token")
        field.send_keys("not the token")
        field.submit()
        self.wait.until(lambda d: "not this server" in d.page_source)
        self.assertNotIn(ids[0], self.driver.page_source)

        self.sign_in()
        self.assertEqual(self.driver.current_url, self.larder.base + "/", "the token never shows in a URL")
        live = self.driver.find_element(By.ID, "live").text
        for id in ids:
            self.assertIn(id, live)
        self.assertIn("stores 1–5 of 5", live)
        self.assertRegex(live, r"\b\d+(\.\d)? KB\b", "sizes, human readable")
        self.shoot("2-stores")

        # The session cookie is there but out of the page's reach.
        cookie = self.driver.get_cookie(self.larder.cookie_name)
        self.assertIsNotNone(cookie)
        self.assertTrue(cookie["httpOnly"])
        self.assertEqual(cookie["sameSite"], "Strict")
        self.assertNotIn(TOKEN, cookie["value"])
        self.assertNotIn("larder_session", self.js("return document.cookie"))

        # Delete from the page: the row goes, and the store with it.
        victim = ids[0]
        self.driver.find_element(By.CSS_SELECTOR, 'button[data-delete="%s"]' % victim).click()
        self.wait.until(lambda d: not d.find_elements(By.CSS_SELECTOR, 'button[data-delete="%s"]' % victim))
        self.assertEqual(self.larder.call("GET", "/stores/" + victim)[0], 404)
        self.wait.until(lambda d: "stores 1–4 of 4" in d.find_element(By.ID, "live").text)
        self.assertIn("Deleted " + victim, self.driver.find_element(By.ID, "status").text)
        self.shoot("3-deleted")

        # Links that need the token work with the cookie alone.
        self.driver.get(self.larder.base + "/metrics")
        self.assertIn("larder_live_stores", self.driver.page_source)
        self.driver.get(self.larder.base + "/")
        self.wait.until(lambda d: d.find_elements(By.ID, "live"))
        self.assertEqual(self.csp_violations(), [])

        # Signing out shows the form again.
        self.driver.find_element(By.CSS_SELECTOR, 'form[action="/sign-out"] button').click()
        self.wait.until(lambda d: d.find_elements(By.NAME, "token"))
        self.assertIsNone(self.driver.get_cookie(self.larder.cookie_name))

    def test_filter_by_run_and_template_mark_kept_and_delete_a_runs_stores(self):
        run1 = self.create(2, template="gallery", label="run-1/tests/test_a.py/test_x")
        kept = self.create(1, label="run-1/tests/test_b.py/test_fails")[0]
        run2 = self.create(1, template="gallery", label="run-2/tests/test_a.py/test_x")
        self.assertEqual(self.larder.call("PATCH", "/stores/" + kept, {"keep": True})[0], 200)
        self.sign_in()

        # The filter form: a label prefix, and a template from the catalog.
        field = self.driver.find_element(By.NAME, "label_prefix")
        field.send_keys("run-1/")
        field.submit()
        self.wait.until(lambda d: "label_prefix=run-1" in d.current_url)
        live = self.driver.find_element(By.ID, "live").text
        self.assertIn("stores 1–3 of 3 matching", live)
        for id in run1 + [kept]:
            self.assertIn(id, live)
        self.assertNotIn(run2[0], live)
        row = self.driver.find_element(By.CSS_SELECTOR, 'button[data-delete="%s"]' % kept).find_element(By.XPATH, "./ancestor::tr")
        self.assertIn("kept", row.get_attribute("class"))
        self.assertIn("kept", row.find_element(By.CSS_SELECTOR, "td.label").text)
        self.shoot("5-filtered")

        self.driver.get(self.larder.base + "/?template=gallery")
        live = self.wait.until(lambda d: d.find_element(By.ID, "live")).text
        self.assertIn("stores 1–3 of 3 matching", live)
        self.assertNotIn(kept, live)
        self.assertFalse(self.driver.find_elements(By.CSS_SELECTOR, "button[data-delete-prefix]"), "no bulk delete without a label prefix alone")

        # One run's stores at once, kept ones too, after a confirmation; the other run's stay.
        self.driver.get(self.larder.base + "/?label_prefix=run-1%2F")
        button = self.wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "button[data-delete-prefix]"))
        self.assertEqual(button.text, "delete these 3 stores")
        button.click()
        alert = self.wait.until(lambda d: d.switch_to.alert)
        self.assertIn("3 stores whose label starts with", alert.text)
        alert.dismiss()
        self.assertEqual(self.larder.call("GET", "/stores/" + kept)[0], 200, "dismissed: nothing deleted")
        button.click()
        self.wait.until(lambda d: d.switch_to.alert).accept()
        self.wait.until(lambda d: "Deleted 3 stores labelled run-1/" in d.find_element(By.ID, "status").text)
        for id in run1 + [kept]:
            self.assertEqual(self.larder.call("GET", "/stores/" + id)[0], 404)
        self.assertEqual(self.larder.call("GET", "/stores/" + run2[0])[0], 200)
        self.wait.until(lambda d: "no stores match" in d.find_element(By.ID, "live").text)
        self.assertEqual(self.csp_violations(), [])

        # The migration checks, as a page: its button runs them (a GET runs nothing).
        self.driver.find_element(By.LINK_TEXT, "run migration checks").click()
        self.wait.until(lambda d: "migration checks" in d.find_element(By.TAG_NAME, "h1").text)
        self.assertIn("no check has run", self.driver.find_element(By.TAG_NAME, "main").text)
        self.driver.find_element(By.XPATH, "//button[contains(., 'run the migration checks')]").click()
        self.wait.until(lambda d: "passed," in d.find_element(By.TAG_NAME, "main").text)
        text = self.driver.find_element(By.TAG_NAME, "main").text
        self.assertRegex(text, r"\d+ passed, 0 failed")
        self.assertIn("gallery", text)
        self.shoot("6-checks")
        self.assertEqual(self.csp_violations(), [])

    def test_a_stores_page_shows_what_its_test_changed(self):
        id = self.create(1, template="gallery", fixtures=["artists", "artworks"], label="changed")[0]
        status, store, _ = self.larder.call("GET", "/stores/" + id)
        # What a test does, on the file, with its own driver.
        db = sqlite3.connect(store["path"])
        db.execute("UPDATE artists SET name = 'Hilma af Klint (1862-1944)' WHERE id = 1")
        db.execute("DELETE FROM artworks WHERE id = 12")
        db.executemany("INSERT INTO artists (name, born) VALUES (?, ?)", [("artist %d" % i, 1900 + i) for i in range(30)])
        db.execute("CREATE TABLE notes (body TEXT)")
        db.execute("INSERT INTO notes VALUES ('<script>alert(1)</script>')")
        db.commit()
        db.close()

        self.sign_in()
        self.driver.find_element(By.CSS_SELECTOR, 'a[href="/stores/%s/page"]' % id).click()
        self.wait.until(lambda d: "What the test changed" in d.page_source)
        self.assertEqual(self.driver.current_url, self.larder.base + "/stores/%s/page" % id)
        main = self.driver.find_element(By.TAG_NAME, "main").text
        self.assertIn("template gallery at version 6 with fixtures artists, artworks", main)
        self.assertIn("artists 30 inserted · 1 updated · 0 deleted", main)
        self.assertIn("artworks 0 inserted · 0 updated · 1 deleted", main)
        self.assertIn("table notes added", main)
        # Inserted rows green, deleted red, the updated cell old → new.
        inserted = self.driver.find_elements(By.CSS_SELECTOR, "table.diff tr.insert")
        self.assertEqual(len(inserted), 31, "30 artists and the note")
        green = self.js("return getComputedStyle(arguments[0]).backgroundColor", inserted[0].find_element(By.TAG_NAME, "td"))
        deleted = self.driver.find_element(By.CSS_SELECTOR, "table.diff tr.delete")
        red = self.js("return getComputedStyle(arguments[0]).backgroundColor", deleted.find_element(By.TAG_NAME, "td"))
        self.assertEqual((green, red), ("rgb(227, 245, 230)", "rgb(253, 231, 231)"))
        self.assertIn("Untitled #5", deleted.text)
        changed = self.driver.find_element(By.CSS_SELECTOR, "table.diff tr.update td.changed")
        self.assertEqual(changed.find_element(By.TAG_NAME, "del").text, "Hilma af Klint")
        self.assertEqual(changed.find_element(By.TAG_NAME, "ins").text, "Hilma af Klint (1862-1944)")
        # The test's text is shown, never run.
        self.assertIn("<script>alert(1)</script>", main)
        # Tables with their counts and first rows, paged.
        self.assertIn("artists 34 row(s)", main)
        self.assertIn("rows 1–20 of 34", main)
        self.shoot("5-store-page")
        self.driver.find_element(By.CSS_SELECTOR, 'a[rel="next"][href*="table=artists"]').click()
        self.wait.until(lambda d: "rows 21–34 of 34" in d.find_element(By.TAG_NAME, "main").text)
        self.assertIn("artist 29", self.driver.find_element(By.TAG_NAME, "main").text)
        self.shoot("6-store-page-later-rows")
        # The downloads it links to.
        for link in ("artifact", "database", "diff"):
            self.assertTrue(self.driver.find_elements(By.CSS_SELECTOR, 'a[href="/stores/%s/%s"]' % (id, link)), link)
        self.assertEqual(self.csp_violations(), [])

    def test_auto_refresh_keeps_the_document_and_its_scroll_position(self):
        ids = self.create(60, label="scroll")
        self.sign_in()
        self.assertIn("of 60", self.driver.find_element(By.ID, "live").text)
        height = self.js("return document.documentElement.scrollHeight")
        self.assertGreater(height, 1600, "the page must scroll")
        self.js("window.larderMarker = 'same document'; window.scrollTo(0, arguments[0]);", 900)
        self.wait.until(lambda d: self.js("return window.scrollY") > 0)
        before = self.js("return window.scrollY")

        # A change the next refresh shows, which does not change the page's height.
        label = "fresh%d" % (int(time.time()) % 1000)
        status, _, _ = self.larder.call("PATCH", "/stores/" + ids[30], {"label": label})
        self.assertEqual(status, 200)
        self.wait.until(lambda d: label in self.js("return document.getElementById('live').textContent"))

        self.assertEqual(self.js("return window.larderMarker"), "same document", "the page was reloaded, not refreshed in place")
        self.assertEqual(self.js("return window.scrollY"), before)
        self.shoot("4-scrolled-after-refresh")
        self.assertEqual(self.csp_violations(), [])


if __name__ == "__main__":
    if not os.access(BINARY, os.X_OK):
        sys.exit("usage: test_dashboard.py BINARY (a built larder)")
    if SELENIUM is not None or not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        # CI installs both (scripts/setup): there a missing browser is a failure, not a skip.
        if os.environ.get("CI") == "true":
            sys.exit("the browser tests cannot run in CI: %s" % (SELENIUM or "no Chromium or chromedriver"))
        print("NOTICE: the browser tests are skipped: %s" % (
            "Selenium is not installed; run scripts/browser-test" if SELENIUM is not None
            else "no Chromium or chromedriver (apt-get install chromium chromium-driver)"), file=sys.stderr)
    unittest.main(argv=sys.argv[:1], verbosity=2)
