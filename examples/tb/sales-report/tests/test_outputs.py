"""Checks /app/report.py on the shipped sales and on files it has never seen."""
import subprocess


def report(*args):
    r = subprocess.run(["python3", "/app/report.py", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def report_of(tmp_path, csv):
    path = tmp_path / "sales.csv"
    path.write_text(csv)
    return report(str(path))


def test_shipped_sales():
    assert report() == "north 70.38\nsouth 64.49\neast 47.15\nwest 43.49\n"


def test_first_sale_counts(tmp_path):
    csv = "region,item,amount\nsouth,kettle,10.00\nnorth,mug,3.00\nnorth,mug,3.00\n"
    assert report_of(tmp_path, csv) == "south 10.00\nnorth 6.00\n"


def test_cents_and_quoted_items(tmp_path):
    csv = 'region,item,amount\nwest,"plates, blue",0.35\nwest,"bowl ""deep""",0.35\neast,spoon,0.69\n'
    assert report_of(tmp_path, csv) == "west 0.70\neast 0.69\n"


def test_largest_first_ties_by_name(tmp_path):
    csv = "region,item,amount\nmid,a,5\nalpha,b,12.5\nzulu,c,5.00\nbeta,d,2.5\nbeta,e,2.5\n"
    assert report_of(tmp_path, csv) == "alpha 12.50\nbeta 5.00\nmid 5.00\nzulu 5.00\n"
